"""Manual pages of Debian bookworm: a page's NAME line -> the pages in its SEE ALSO section.

Point and label text: the NAME line (``ls - list directory contents``). Labels: the pages its
SEE ALSO section names as ``name(section)`` that exist among the packages below (a name that a
page only lists as an alias, through a symbolic link or a ``.so`` page, leads to that page).
Group: the package the page comes from. The packages are those of a fixed list that hold many
manual pages with SEE ALSO sections (C library, X11 and XCB, Tcl/Tk, ncurses, MPI, SELinux,
coreutils and system tools), each at its bookworm release version.
"""

from __future__ import annotations

import gzip
import posixpath
import re
from pathlib import Path

from . import DatasetCard, Item, write_related_items
from .debian_archive import DEFAULT_MIRROR, DebianPackage, fetch, package_files

PACKAGES = (
    DebianPackage(
        "at",
        "3.2.5-1+b1",
        "pool/main/a/at/at_3.2.5-1+b1_amd64.deb",
        "45dfbf5a84ae390a97ade5a4f6c92fb1b7522c5cd2701bf4514b080eb5eabaab",
        44616,
    ),
    DebianPackage(
        "binutils-common",
        "2.40-2",
        "pool/main/b/binutils/binutils-common_2.40-2_amd64.deb",
        "ab314134f43a0891a48f69a9bc33d825da748fa5e0ba2bebb7a5c491b026f1a0",
        2486664,
    ),
    DebianPackage(
        "bzip2",
        "1.0.8-5+b1",
        "pool/main/b/bzip2/bzip2_1.0.8-5+b1_amd64.deb",
        "438871b3f5c5c7a357a9840951dab9dab8db7eb1ff760a563226fafa111b99e5",
        49804,
    ),
    DebianPackage(
        "coreutils",
        "9.1-1",
        "pool/main/c/coreutils/coreutils_9.1-1_amd64.deb",
        "61038f857e346e8500adf53a2a0a20859f4d3a3b51570cc876b153a2d51a3091",
        2896560,
    ),
    DebianPackage(
        "cron",
        "3.0pl1-162",
        "pool/main/c/cron/cron_3.0pl1-162_amd64.deb",
        "c1e12d9c993460e6396107668aa7ba79f8633decebb53aa6c38049584448be3f",
        73084,
    ),
    DebianPackage(
        "debhelper",
        "13.11.4",
        "pool/main/d/debhelper/debhelper_13.11.4_all.deb",
        "bd764e98a9204a4b6b2d9e7b461c50fdae579314309804baff93d21e0498b64b",
        941736,
    ),
    DebianPackage(
        "diffutils",
        "1:3.8-4",
        "pool/main/d/diffutils/diffutils_3.8-4_amd64.deb",
        "8bdfedc14c1035e3750e9f055ac9c1ecd9b5d05d9e6dc6466c4e9237eef407dd",
        351740,
    ),
    DebianPackage(
        "dpkg-dev",
        "1.21.23",
        "pool/main/d/dpkg/dpkg-dev_1.21.23_all.deb",
        "43547075395dbe9290e6a5f34e9ba93aa5dcf7dfc5698c3d30cc3c85e5f7e3de",
        1354256,
    ),
    DebianPackage(
        "dpkg",
        "1.21.23",
        "pool/main/d/dpkg/dpkg_1.21.23_amd64.deb",
        "f89e9f8d1a4a50ade44be3ed59a6ec55460fce205d2f8520c5c492137c5b609b",
        1567804,
    ),
    DebianPackage(
        "e2fsprogs",
        "1.47.0-2+b2",
        "pool/main/e/e2fsprogs/e2fsprogs_1.47.0-2+b2_amd64.deb",
        "fedd424691c08ef0739729026be298e7be8236337bf8e031b3c7ec66794e6fc2",
        571920,
    ),
    DebianPackage(
        "findutils",
        "4.9.0-4",
        "pool/main/f/findutils/findutils_4.9.0-4_amd64.deb",
        "5dd86bd0af4aa73f067dfd6b8339dd868f2dd84056aa79db29d1206d4fbc5e04",
        635500,
    ),
    DebianPackage(
        "gawk",
        "1:5.2.1-2",
        "pool/main/g/gawk/gawk_5.2.1-2_amd64.deb",
        "9cd63c1b35ff082092c221a23dcb167f72c4d1c3de3a42e11f16181f42ab3b55",
        672772,
    ),
    DebianPackage(
        "grep",
        "3.8-5",
        "pool/main/g/grep/grep_3.8-5_amd64.deb",
        "3264acea728df3c48a54f20e9291b965130e306b9d00adac76647049da7196df",
        421444,
    ),
    DebianPackage(
        "gzip",
        "1.12-1",
        "pool/main/g/gzip/gzip_1.12-1_amd64.deb",
        "eabec1dde2834f72540d7b93fc5df2625f52611c06d93d61f5cdb12480e0e6a3",
        140364,
    ),
    DebianPackage(
        "iproute2",
        "6.1.0-3",
        "pool/main/i/iproute2/iproute2_6.1.0-3_amd64.deb",
        "1204b29e916e836267096d0b9d778106752f821ebde0d281539008b4386d9070",
        1045828,
    ),
    DebianPackage(
        "libaudit-dev",
        "1:3.0.9-1",
        "pool/main/a/audit/libaudit-dev_3.0.9-1_amd64.deb",
        "9da2bfd3a93c8f60341f3a94a9d0567ece908bd09a9d48d43d7f6046133e812d",
        81208,
    ),
    DebianPackage(
        "libbsd-dev",
        "0.11.7-2",
        "pool/main/libb/libbsd/libbsd-dev_0.11.7-2_amd64.deb",
        "788ec28ca78eab1ba14d2e1a50727efb7276c6b034163dca40931d8ab3d94aab",
        243072,
    ),
    DebianPackage(
        "libdmx-dev",
        "1:1.1.4-2",
        "pool/main/libd/libdmx/libdmx-dev_1.1.4-2_amd64.deb",
        "cb84fb22f5bbe28a3c3da583881569117b0755f4333fee647671948f58e50a41",
        43304,
    ),
    DebianPackage(
        "libfontconfig-dev",
        "2.14.1-4",
        "pool/main/f/fontconfig/libfontconfig-dev_2.14.1-4_amd64.deb",
        "74f4bbde5795e4fb4c453308bd0eb8ef45d7ade3cf11b3c18394f9e2c15d28df",
        408964,
    ),
    DebianPackage(
        "libfs-dev",
        "2:1.0.8-1",
        "pool/main/libf/libfs/libfs-dev_1.0.8-1_amd64.deb",
        "4ef2d00b1fd41d24b986a8d4d1d434e1577d24d69dfd9c877e4f18e3bbb3772c",
        43640,
    ),
    DebianPackage(
        "libice-dev",
        "2:1.0.10-1",
        "pool/main/libi/libice/libice-dev_1.0.10-1_amd64.deb",
        "9d111d7e07104f7b9cc284d32e811ab01f376613f163b0580fbd7b61440ff669",
        67052,
    ),
    DebianPackage(
        "libkeyutils-dev",
        "1.6.3-2",
        "pool/main/k/keyutils/libkeyutils-dev_1.6.3-2_amd64.deb",
        "b26aa6df93bbf977f3b945ea7329cb89cc800b93cc0e4a3542c964f3e387d64a",
        48512,
    ),
    DebianPackage(
        "libmnl-dev",
        "1.0.4-3",
        "pool/main/libm/libmnl/libmnl-dev_1.0.4-3_amd64.deb",
        "20c6c2164ba23f05d3bf1aabb86a43b07043e76f74a15433af62121bbf4379eb",
        7752,
    ),
    DebianPackage(
        "libnetfilter-conntrack-dev",
        "1.0.9-3",
        "pool/main/libn/libnetfilter-conntrack/libnetfilter-conntrack-dev_1.0.9-3_amd64.deb",
        "7a6ff2cc5b374136155a9c8a134ca63b804a4d55240fdbba0a25cbf111fed60b",
        15220,
    ),
    DebianPackage(
        "libnl-3-dev",
        "3.7.0-0.2+b1",
        "pool/main/libn/libnl3/libnl-3-dev_3.7.0-0.2+b1_amd64.deb",
        "ab12c34743d146474498eef5a5d2754c0163ac068d95add188b94d8e8f0444f7",
        103920,
    ),
    DebianPackage(
        "libpcap0.8-dev",
        "1.10.3-1",
        "pool/main/libp/libpcap/libpcap0.8-dev_1.10.3-1_amd64.deb",
        "5f66e87262e42cc42a77d6acdb41098e4ff3e6db3bdba1b73189dea5a3afb88c",
        281104,
    ),
    DebianPackage(
        "libselinux1-dev",
        "3.4-1+b6",
        "pool/main/libs/libselinux/libselinux1-dev_3.4-1+b6_amd64.deb",
        "efd67cd1c09a19bb1f33a53bfa30e703cecee0345f66ba727a7cc64c34656206",
        156780,
    ),
    DebianPackage(
        "libsemanage-dev",
        "3.4-1+b5",
        "pool/main/libs/libsemanage/libsemanage-dev_3.4-1+b5_amd64.deb",
        "c8a0bcb853aea42528166c834f2d58fe847d3ed3e82df4d0280965fb33784839",
        125216,
    ),
    DebianPackage(
        "libsm-dev",
        "2:1.2.3-1",
        "pool/main/libs/libsm/libsm-dev_1.2.3-1_amd64.deb",
        "2ff8641d3217dc1a0f26514f5d8de2009669423a4aa0db46b3df564a8b367026",
        37956,
    ),
    DebianPackage(
        "liburing-dev",
        "2.3-3",
        "pool/main/libu/liburing/liburing-dev_2.3-3_amd64.deb",
        "3e2c6dbe416995570c4b13087b9e26dbcc53d6d48bce5f74412a00e7defecc21",
        148824,
    ),
    DebianPackage(
        "libxaw7-dev",
        "2:1.0.14-1",
        "pool/main/libx/libxaw/libxaw7-dev_1.0.14-1_amd64.deb",
        "cb93de16df0508b53e1f6913c095f83daf203c47cc918e0fc9640c17c02e8ba5",
        260608,
    ),
    DebianPackage(
        "libxcb-doc",
        "1.15-1",
        "pool/main/libx/libxcb/libxcb-doc_1.15-1_all.deb",
        "ac7e177ba7657f8af9b71a25272406421a6db1c074a0c63de9fb1c54d7f0cb79",
        9225564,
    ),
    DebianPackage(
        "libxcomposite-dev",
        "1:0.4.5-1",
        "pool/main/libx/libxcomposite/libxcomposite-dev_0.4.5-1_amd64.deb",
        "6aecea058e55f46341be898d6e21b933fee5a314e3133ec33b4b88441e7d52b4",
        20124,
    ),
    DebianPackage(
        "libxcursor-dev",
        "1:1.2.1-1",
        "pool/main/libx/libxcursor/libxcursor-dev_1.2.1-1_amd64.deb",
        "9f9eb5d01049b81f13f34d2c54aa474cc649853c752eaa53aba5dcd846d18b1b",
        51780,
    ),
    DebianPackage(
        "libxdamage-dev",
        "1:1.1.6-1",
        "pool/main/libx/libxdamage/libxdamage-dev_1.1.6-1_amd64.deb",
        "ccf1dc86fa8a8a959ec4f87e3c389f791a60c266b635cd8d484731e3e68e8bc8",
        14984,
    ),
    DebianPackage(
        "libxfixes-dev",
        "1:6.0.0-2",
        "pool/main/libx/libxfixes/libxfixes-dev_6.0.0-2_amd64.deb",
        "75fd16d0f67f5d4eb718d81bfa15d0b2163637293e48f1e24e2c11f9af590dda",
        24732,
    ),
    DebianPackage(
        "libxft-dev",
        "2.3.6-1",
        "pool/main/x/xft/libxft-dev_2.3.6-1_amd64.deb",
        "5d69c098c6cc8f653f4c20f8a09853c9e94bea50f0517427ec4e05159a6688b7",
        80256,
    ),
    DebianPackage(
        "libxi-dev",
        "2:1.8-1+b1",
        "pool/main/libx/libxi/libxi-dev_1.8-1+b1_amd64.deb",
        "80cd30f783e90a46b0190990d6194dc83d9c24d67a81cc2346f69b8e2ddc9590",
        245680,
    ),
    DebianPackage(
        "libxinerama-dev",
        "2:1.1.4-3",
        "pool/main/libx/libxinerama/libxinerama-dev_1.1.4-3_amd64.deb",
        "6eef91a823011cfe8a082624deadc30ac9ce886827832fea482603b1fdc0bd25",
        20100,
    ),
    DebianPackage(
        "libxkbfile-dev",
        "1:1.1.0-1",
        "pool/main/libx/libxkbfile/libxkbfile-dev_1.1.0-1_amd64.deb",
        "ed7efab19ec4d8167a742c0aa83cfd1ba65d77df6d1ea7d976ce271e70e81566",
        86232,
    ),
    DebianPackage(
        "libxmu-dev",
        "2:1.1.3-3",
        "pool/main/libx/libxmu/libxmu-dev_1.1.3-3_amd64.deb",
        "7309dbad76537b598bc1efd0c3ee56124481a4a3402a787d504229f99d0190d3",
        65908,
    ),
    DebianPackage(
        "libxrandr-dev",
        "2:1.5.2-2+b1",
        "pool/main/libx/libxrandr/libxrandr-dev_1.5.2-2+b1_amd64.deb",
        "a0048d088226403419d9b0856e2d6d29a4facdd1708b6ceda095d7190f819ff3",
        47064,
    ),
    DebianPackage(
        "libxrender-dev",
        "1:0.9.10-1.1",
        "pool/main/libx/libxrender/libxrender-dev_0.9.10-1.1_amd64.deb",
        "51be2e92b7bb9a81f8dbcad7a0086a58c779761c17f8aa13893b843bced0ae9b",
        41072,
    ),
    DebianPackage(
        "libxss-dev",
        "1:1.2.3-1",
        "pool/main/libx/libxss/libxss-dev_1.2.3-1_amd64.deb",
        "11968b1ac7a10de3731be164b343a3c960633a003ee5629770e06927222ef36b",
        23488,
    ),
    DebianPackage(
        "libxtst-dev",
        "2:1.2.3-1.1",
        "pool/main/libx/libxtst/libxtst-dev_1.2.3-1.1_amd64.deb",
        "e81d9780229d2d5892148f95fa73d7aaa33ad9af0a14623782001a27034d1633",
        32188,
    ),
    DebianPackage(
        "libxv-dev",
        "2:1.0.11-1.1",
        "pool/main/libx/libxv/libxv-dev_1.0.11-1.1_amd64.deb",
        "3d013b7069ac63ff7990f918c9231f8c0f0f20953f546a259b4509ce9633fc49",
        48376,
    ),
    DebianPackage(
        "libxvmc-dev",
        "2:1.0.12-2",
        "pool/main/libx/libxvmc/libxvmc-dev_1.0.12-2_amd64.deb",
        "8d9716e4c16cf322ea28aa07f273622d797fda0d8cb4107805a6f9bd1b80aded",
        36500,
    ),
    DebianPackage(
        "lvm2",
        "2.03.16-2",
        "pool/main/l/lvm2/lvm2_2.03.16-2_amd64.deb",
        "608ae8de670342fc80d388185be64af9c886e61d145669a606db002663f7fd82",
        1228616,
    ),
    DebianPackage(
        "make",
        "4.3-4.1",
        "pool/main/m/make-dfsg/make_4.3-4.1_amd64.deb",
        "a1a83af8cbd854af887b72ad196b1f4af58387815e21ced1000253a116a46e2a",
        395632,
    ),
    DebianPackage(
        "manpages-dev",
        "6.03-2",
        "pool/main/m/manpages/manpages-dev_6.03-2_all.deb",
        "96f55cb5e26231d5567c89b692bced63825a14a2d5bd18fdf16ea2ed44eb9838",
        2030264,
    ),
    DebianPackage(
        "manpages",
        "6.03-2",
        "pool/main/m/manpages/manpages_6.03-2_all.deb",
        "efa1ba4cd19ad7baeae959c9209a7eb74be2ebb858bcabb412597bfc9f588c91",
        1331652,
    ),
    DebianPackage(
        "mdadm",
        "4.2-5",
        "pool/main/m/mdadm/mdadm_4.2-5_amd64.deb",
        "93ac76fa9aa5b97256688e067b0a31c11aadf63321d6dbdf486e37de2338d454",
        443056,
    ),
    DebianPackage(
        "mpich-doc",
        "4.0.2-3",
        "pool/main/m/mpich/mpich-doc_4.0.2-3_all.deb",
        "2d3e8f2feb4b28888412ebde2cfdaa3972753eaeba126ef90bc9bae95c7266de",
        1104064,
    ),
    DebianPackage(
        "ncurses-doc",
        "6.4-4",
        "pool/main/n/ncurses/ncurses-doc_6.4-4_all.deb",
        "c3dab5d65bfd62a7468daacf59c63f15fb627fe4e4d105b54777a370d0c6df77",
        933004,
    ),
    DebianPackage(
        "netpbm",
        "2:11.01.00-2",
        "pool/main/n/netpbm-free/netpbm_11.01.00-2_amd64.deb",
        "24f1ac9e424cfa097c38dc1108638762fd2f04f9e1182245382ed15bc3e04438",
        2015280,
    ),
    DebianPackage(
        "nmh",
        "1.8~RC2-2",
        "pool/main/n/nmh/nmh_1.8~RC2-2_amd64.deb",
        "d03665cb0f13fd0af346648cafc3bb55f1076f1350015474aaff06aa3086e0d1",
        1489216,
    ),
    DebianPackage(
        "openmpi-doc",
        "4.1.4-3",
        "pool/main/o/openmpi/openmpi-doc_4.1.4-3_all.deb",
        "f297ec1e56a40a48b475cb62ab6283b6d2dd3cdb4f948a68c3c41cdeaaeb63c3",
        1077944,
    ),
    DebianPackage(
        "pari-gp",
        "2.15.2-1",
        "pool/main/p/pari/pari-gp_2.15.2-1_amd64.deb",
        "a9e75f6781f35af3044e4e3a726e01fde598343d1a380e3124a7466880bf5d27",
        3835932,
    ),
    DebianPackage(
        "patch",
        "2.7.6-7",
        "pool/main/p/patch/patch_2.7.6-7_amd64.deb",
        "8c6d49b771530dbe26d7bd060582dc7d2b4eeb603a20789debc1ef4bbbc4ef67",
        127848,
    ),
    DebianPackage(
        "policycoreutils",
        "3.4-1",
        "pool/main/p/policycoreutils/policycoreutils_3.4-1_amd64.deb",
        "2194e7dff8dee65fa1f568f7f862fb2dcbe8adfc79ba8759c999386ccb6bcc9d",
        161028,
    ),
    DebianPackage(
        "procps",
        "2:4.0.2-3",
        "pool/main/p/procps/procps_4.0.2-3_amd64.deb",
        "d9d0e75779cb79af869181f17b93c5c263a2b89cac6a0193c436160a4483ddc1",
        708712,
    ),
    DebianPackage(
        "psmisc",
        "23.6-1",
        "pool/main/p/psmisc/psmisc_23.6-1_amd64.deb",
        "9d02f654bdf280a6622a9b1371f7a1fa44546702d11991e438558bc259df7b69",
        258696,
    ),
    DebianPackage(
        "selinux-utils",
        "3.4-1+b6",
        "pool/main/libs/libselinux/selinux-utils_3.4-1+b6_amd64.deb",
        "8357d8bfdbde73ff658129c1a6d25a02b4a244bddb2cc444c5a46835e3b8a31f",
        126432,
    ),
    DebianPackage(
        "strace",
        "6.1-0.1",
        "pool/main/s/strace/strace_6.1-0.1_amd64.deb",
        "1942d086a6244a1a9643489d3b0aa604ac44b88991d6c69217a63a193671bd4f",
        1313880,
    ),
    DebianPackage(
        "sysstat",
        "12.6.1-1",
        "pool/main/s/sysstat/sysstat_12.6.1-1_amd64.deb",
        "b9dbb951ab04ef779225907b29cc29be59ecfa7c4bf9cd97ea1ae51a15091648",
        595548,
    ),
    DebianPackage(
        "tcl8.6-doc",
        "8.6.13+dfsg-2",
        "pool/main/t/tcl8.6/tcl8.6-doc_8.6.13+dfsg-2_all.deb",
        "e6468aa726a0d77f3e61ae4714bcf7c4c4ddd02828388977f765ffdda4935876",
        1731000,
    ),
    DebianPackage(
        "tcllib",
        "1.21+dfsg-1",
        "pool/main/t/tcllib/tcllib_1.21+dfsg-1_all.deb",
        "6bf4cbb66b52d47dcf02e8de4469597d25dc475668d49f8b7f3f3135e3eb2d08",
        4597300,
    ),
    DebianPackage(
        "tk8.6-doc",
        "8.6.13-2",
        "pool/main/t/tk8.6/tk8.6-doc_8.6.13-2_all.deb",
        "8e93967b9d5d36e2eff002f27261b93417a7c439a8207932fe8335f0ac84b407",
        1224248,
    ),
    DebianPackage(
        "tklib",
        "0.8~20230222-1",
        "pool/main/t/tklib/tklib_0.8~20230222-1_all.deb",
        "b93703b069ab205690ce3e30f9cfb3c71ca00e2a5e0ab458d9a669abf64e5438",
        1405832,
    ),
    DebianPackage(
        "x11-utils",
        "7.7+5",
        "pool/main/x/x11-utils/x11-utils_7.7+5_amd64.deb",
        "64f2b157e6f00590c4d8633333bfdc890b66fc26ad61ce5e6f1fddcd0527ed1d",
        202012,
    ),
    DebianPackage(
        "x11-xserver-utils",
        "7.7+9+b1",
        "pool/main/x/x11-xserver-utils/x11-xserver-utils_7.7+9+b1_amd64.deb",
        "e68ca467aae5fa2b6241ecd6986c2954bef377895a5244310c5757fcad325abc",
        169208,
    ),
    DebianPackage(
        "xfsprogs",
        "6.1.0-1",
        "pool/main/x/xfsprogs/xfsprogs_6.1.0-1_amd64.deb",
        "e2d2a60dd29d568b5724b66d9ff864305cec61a15e6ba842079398524e1c5718",
        992260,
    ),
    DebianPackage(
        "zsh-common",
        "5.9-4",
        "pool/main/z/zsh/zsh-common_5.9-4_all.deb",
        "4f263aa88910f750965b1a83dcbca1355b2cf509acffe96cc2d856333909a7b5",
        4147272,
    ),
)
CARD = DatasetCard(
    name="manpages",
    domain="software documentation",
    summary="manual pages and their SEE ALSO pages",
    text="the page's NAME line",
    labels="the pages its SEE ALSO section names that exist in the same packages",
    license="the licenses of the packages listed (free software; see each package's copyright file)",
    sources=PACKAGES,
)

_PAGE = re.compile(r"usr/share/man/man[0-9a-z]+/([^/]+)\.gz")
_REFERENCE = re.compile(r"([A-Za-z_][\w.:+-]*)\s*\((\d\w*|n)\)")
# a bare name in a SEE ALSO section (MPI_Isend, File::Spec) counts when it names a page: the
# shape keeps ordinary words of the section's prose out
_BARE_NAME = re.compile(r"\b([A-Za-z]\w*(?:_\w+|::\w+)+)\b")
_SECTION_HEADER = re.compile(r'^\.S[Hh]\s+"?([^"]*)"?\s*$')
_TEXT_MACROS = re.compile(r"^\.(B|I|BR|RB|IR|RI|BI|IB|SM|SB|Nm|Nd|Xr)(\s+|$)")


def clean_roff(line: str) -> str:
    """The words of one roff line: font changes, size changes, escapes and quotes removed."""
    line = _TEXT_MACROS.sub("", line)
    if line.startswith(".") or line.startswith("'"):
        return ""
    line = re.sub(r"\\f(\[[^\]]*\]|\(..|.)", "", line)
    line = re.sub(r"\\s[+-]?\d", "", line)
    line = re.sub(r"\\[(](em|en)", "-", line)
    line = re.sub(r"\\\*(\(..|\[[^\]]*\]|.)|\\[(]..|\\[|^&%]", "", line)
    line = line.replace("\\-", "-").replace("\\ ", " ").replace("\\e", "\\").replace('"', "")
    return line


def _sections(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        m = _SECTION_HEADER.match(line)
        if m:
            current = m.group(1).strip().upper()
            out.setdefault(current, [])
        elif current is not None:
            out[current].append(line)
    return out


def _name_line(lines: list[str]) -> str:
    words = []
    for line in lines:
        if line.startswith(".Nd"):  # mdoc: the description follows the names
            words.append("-")
        words.append(clean_roff(line))
    text = " ".join(" ".join(words).split())
    return re.sub(r"\s+,", ",", text)


def _see_also(lines: list[str]) -> list[tuple[str, str]]:
    refs = []
    for line in lines:
        if line.startswith(".Xr"):  # mdoc cross reference: .Xr name section
            parts = line.split()
            if len(parts) >= 3:
                refs.append((parts[1], parts[2].rstrip(",")))
            continue
        text = clean_roff(line)
        found = _REFERENCE.findall(text)
        refs.extend(found)
        named = {name for name, _ in found}
        refs.extend((name, "") for name in _BARE_NAME.findall(_REFERENCE.sub(" ", text)) if name not in named)
    return refs


def parse(packages: dict[str, list[tuple[str, bytes | str]]]) -> list[Item]:
    """Items of the manual pages in ``packages`` (name -> ``(path, content)`` in archive order)."""
    pages: dict[str, tuple[str, list[tuple[str, str]], str]] = {}  # key "name.section" -> (name line, refs, package)
    alias: dict[str, str] = {}
    for package, files in packages.items():
        for path, content in files:
            m = _PAGE.fullmatch(path)
            if not m:
                continue
            key = m.group(1)
            if key in pages or key in alias:
                continue  # the first package that has a page keeps it
            if isinstance(content, str):  # a symbolic link
                alias[key] = posixpath.basename(content).removesuffix(".gz")
                continue
            text = gzip.decompress(content).decode("utf-8", errors="replace")
            if text.startswith(".so "):
                alias[key] = posixpath.basename(text.split()[1]).removesuffix(".gz")
                continue
            sections = _sections(text)
            pages[key] = (_name_line(sections.get("NAME", [])), _see_also(sections.get("SEE ALSO", [])), package)
    by_name: dict[tuple[str, str], set[str]] = {}
    for key in list(pages) + list(alias):
        name, _, section = key.rpartition(".")
        target = key if key in pages else alias.get(key)
        if name and section and target in pages:
            by_name.setdefault((name, section[0].lower()), set()).add(target)
            by_name.setdefault((name, ""), set()).add(target)

    def resolve(name: str, section: str) -> str | None:
        """The page ``name(section)`` names: exact, else the one page of that name in the section's
        number (``3X`` -> ``3x``, ``3`` -> ``3ssl``), else the one page of that name at all."""
        key = f"{name}.{section.lower()}"
        key = key if key in pages else alias.get(key)
        if key in pages:
            return key
        for family in (section[:1].lower(), ""):
            found = by_name.get((name, family), set())
            if found:
                return min(found) if len(found) == 1 else None
        return None

    def uid(key: str) -> str:
        name, _, section = key.rpartition(".")
        return f"{name}({section})"

    items = []
    for key, (name_line, refs, package) in pages.items():
        targets = [resolve(n, s) for n, s in refs]
        items.append(Item(uid(key), name_line, tuple(uid(t) for t in targets if t is not None), package))
    return items


def build(out_dir: str | Path, mirror: str = DEFAULT_MIRROR, log=None, force: bool = False) -> dict:
    packages = {}
    for package in PACKAGES:
        deb = fetch(package, mirror, log)
        packages[package.name] = list(package_files(deb, lambda p: _PAGE.fullmatch(p) is not None))
    return write_related_items(parse(packages), out_dir, CARD, force)
