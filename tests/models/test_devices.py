"""Where the neural models run (``--device``): names, resolution, refusals, and, where torch sees a
CUDA GPU (tests marked ``gpu``; skipped elsewhere), training, mixed precision, saving and loading on it."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # the [neural] extra
import scipy.sparse as sp

from gandalf_xmc.engine.devices import autocast, check_device_name, resolve_device
from gandalf_xmc.engine.records import TrainConfig
from gandalf_xmc.errors import ConfigError
from gandalf_xmc.models.neural_xmc import ModelConfig, NeuralXMC
from gandalf_xmc.models.registry import model_config

from helpers import assert_clean_failure, run_cli, snapshot

TEXTS = ["alpha beta", "gamma delta", "alpha gamma", "epsilon zeta", "beta zeta"]
LABELS = ["alpha", "gamma", "zeta", "omega"]
Y = sp.csr_matrix(np.array([[1, 0, 0, 0], [0, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 1, 0]], dtype=np.float32))
CUDA = torch.cuda.is_available()
cpu_only = pytest.mark.skipif(CUDA, reason="checks what a machine without a CUDA GPU says")


def small_config(family: str = "astec", **train) -> ModelConfig:
    base = dict(epochs=3, batch_size=2, lr=0.05, dense_lr=0.01, train_clusters=2, predict_clusters=4, seed=0)
    base.update(train)
    return ModelConfig(family=family, dim=16, dropout=0.0, max_cluster_size=1, cluster_dim=3, train=TrainConfig(**base))


def states_equal(a: NeuralXMC, b: NeuralXMC) -> bool:
    sa, sb = a.network.state_dict(), b.network.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k].cpu(), sb[k].cpu()) for k in sa)


# ---- names and resolution (every machine) ----


@pytest.mark.parametrize("name", ["auto", "cpu", "cuda", "cuda:0", "cuda:12"])
def test_device_names_accepted(name):
    check_device_name(name)
    TrainConfig(device=name)


@pytest.mark.parametrize("name", ["gpu", "CUDA", "cuda:", "cuda:x", "cpu:0", "", "mps"])
def test_device_names_refused(name):
    with pytest.raises(ConfigError, match="device must be one of auto, cpu, cuda or cuda:N"):
        check_device_name(name)
    with pytest.raises(ConfigError):
        TrainConfig(device=name)


def test_gpu_precision_is_checked():
    assert TrainConfig().gpu_precision == "bfloat16"
    TrainConfig(gpu_precision="float32")
    with pytest.raises(ConfigError, match="gpu_precision must be one of bfloat16, float32"):
        TrainConfig(gpu_precision="float16")


def test_auto_follows_what_torch_sees(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(ConfigError, match="sees no CUDA GPU; use --device cpu or auto"):
        resolve_device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert resolve_device("auto") == torch.device("cuda")
    assert resolve_device("cuda:0") == torch.device("cuda:0")
    with pytest.raises(ConfigError, match="torch sees 1 CUDA GPU"):
        resolve_device("cuda:1")


def test_autocast_changes_nothing_on_the_cpu():
    a, b = torch.randn(4, 8), torch.randn(8, 3)
    with autocast(torch.device("cpu"), "bfloat16"):
        c = a @ b
    assert c.dtype == torch.float32
    assert torch.equal(c, a @ b)


def test_models_without_a_gpu_path_refuse_cuda_but_take_cpu_and_auto():
    assert model_config("linear", device="cpu") == model_config("linear")
    assert model_config("knn", device="auto") == model_config("knn")
    with pytest.raises(ConfigError, match="--device cuda: linear runs on the CPU; the models that use a GPU are astec"):
        model_config("linear", device="cuda")
    assert model_config("astec", device="cpu").train.device == "cpu"
    assert model_config("astec").train.device == "auto"


@cpu_only
def test_cpu_and_auto_train_the_same_model_without_a_gpu():
    a = NeuralXMC(small_config(device="cpu")).fit(TEXTS, Y, LABELS, progress=False)
    b = NeuralXMC(small_config(device="auto")).fit(TEXTS, Y, LABELS, progress=False)
    assert states_equal(a, b)
    assert a.result.device == b.result.device == "cpu"


@cpu_only
def test_asking_for_a_missing_gpu_fails_before_any_work(tiny_dir, tmp_path, capsys):
    with pytest.raises(ConfigError, match="sees no CUDA GPU"):
        model_config("astec", device="cuda")
    with pytest.raises(ConfigError, match="sees no CUDA GPU"):
        NeuralXMC(small_config(device="cuda"))
    before = snapshot(tmp_path)
    for args in (
        ["--model", "astec", "--device", "cuda", "--epochs", "1"],
        ["--model", "astec", "--set", "train.device=cuda", "--epochs", "1"],
        ["--model", "linear", "--device", "cuda"],
        ["--model", "astec", "--device", "gpu"],
    ):
        code, _, err = run_cli(["train", "--data", str(tiny_dir), "--out", str(tmp_path / "m"), *args], capsys)
        assert_clean_failure(code, err, "cuda" if "gpu" not in args else "device must be one of")
    assert snapshot(tmp_path) == before  # nothing written: no model directory, no staging


def test_saved_model_keeps_its_settings_and_loads_on_the_cpu(tmp_path):
    model = NeuralXMC(small_config(device="cpu")).fit(TEXTS, Y, LABELS, progress=False)
    model.save(tmp_path / "m")
    spec = json.loads((tmp_path / "m" / "model.json").read_text())
    assert spec["model"]["train"]["device"] == "cpu"
    assert spec["result"]["device"] == "cpu"
    again = NeuralXMC.load(tmp_path / "m")
    assert again.network.device == torch.device("cpu")
    assert again.config == model.config


def test_int8_encoder_is_for_the_cpu():
    from gandalf_xmc import sentence

    assert sentence.resolve_precision("auto", "cuda") == "bfloat16"
    assert sentence.resolve_precision("float32", "cuda:0") == "float32"
    with pytest.raises(ValueError, match="CPU only"):
        sentence.resolve_precision("int8", "cuda")


# ---- on a GPU (marked gpu: skipped where torch sees none) ----


@pytest.mark.gpu
def test_gpu_float32_training_follows_the_cpu():
    """Same seed, same start (built on the CPU, then moved): float32 on the GPU ends within rounding of the CPU."""
    cpu = NeuralXMC(small_config(device="cpu")).fit(TEXTS, Y, LABELS, progress=False)
    gpu = NeuralXMC(small_config(device="cuda", gpu_precision="float32")).fit(TEXTS, Y, LABELS, progress=False)
    assert gpu.network.device.type == "cuda"
    assert gpu.result.device.startswith("cuda (")
    sc, sg = cpu.network.state_dict(), gpu.network.state_dict()
    for name in sc:
        torch.testing.assert_close(sg[name].cpu(), sc[name], atol=1e-4, rtol=1e-4, msg=name)
    pc, pg = cpu.predict(TEXTS, k=4).toarray(), gpu.predict(TEXTS, k=4).toarray()
    np.testing.assert_allclose(pg, pc, atol=1e-4)


@pytest.mark.gpu
def test_gpu_bfloat16_training_learns_a_soft_target():
    # one point, label 0 with target 0.35: BCE is minimised at sigmoid(score) = 0.35, in bfloat16 autocast too
    Ysoft = sp.csr_matrix(np.array([[0.35, 0, 0, 0]], dtype=np.float32))
    model = NeuralXMC(small_config(device="cuda", epochs=300, batch_size=1))
    model.fit(["alpha beta"], Ysoft, LABELS, progress=False)
    p = model.predict(["alpha beta"], k=4).toarray()[0]
    assert p[0] == pytest.approx(0.35, abs=0.04)


@pytest.mark.gpu
@pytest.mark.parametrize("family", ["astec", "inceptionxml", "inceptionxml-lf"])
def test_gpu_model_saved_loads_on_the_cpu_with_the_same_answers(tmp_path, family):
    model = NeuralXMC(small_config(family, device="cuda", gpu_precision="float32")).fit(TEXTS, Y, LABELS, progress=False)
    model.save(tmp_path / "m")
    again = NeuralXMC.load(tmp_path / "m")
    assert again.network.device == torch.device("cpu")
    assert again.config.train.device == "cuda"
    assert states_equal(model, again)  # the very weights
    # the same weights score alike on either device (cuDNN may run inceptionxml's convolutions in TF32)
    on_gpu, on_cpu = model.predict(TEXTS, k=4).toarray(), again.predict(TEXTS, k=4).toarray()
    np.testing.assert_allclose(on_cpu, on_gpu, atol=2e-3)
    back = again.to("cuda").predict(TEXTS, k=4).toarray()
    np.testing.assert_allclose(back, on_gpu, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_gpu_same_seed_same_model_to_rounding(precision):
    # a GPU adds in an order of its own (atomic adds), so two runs agree to rounding, not to the bit
    a = NeuralXMC(small_config(device="cuda", gpu_precision=precision)).fit(TEXTS, Y, LABELS, progress=False)
    b = NeuralXMC(small_config(device="cuda", gpu_precision=precision)).fit(TEXTS, Y, LABELS, progress=False)
    sa, sb = a.network.state_dict(), b.network.state_dict()
    for name in sa:
        torch.testing.assert_close(sa[name], sb[name], atol=1e-5, rtol=1e-5, msg=name)


@pytest.mark.gpu
@pytest.mark.parametrize("family", ["astec", "dual-encoder"])
def test_gpu_checkpoint_resumes_on_the_cpu_and_back(tmp_path, family):
    # the dual-encoder's label-text priors are buffers whose shapes come from the checkpoint
    NeuralXMC(small_config(family, device="cuda", epochs=2)).fit(TEXTS, Y, LABELS, checkpoint_dir=tmp_path / "c", progress=False)
    resumed = NeuralXMC(small_config(family, device="cpu", epochs=3)).fit(
        TEXTS, Y, LABELS, checkpoint_dir=tmp_path / "c", resume=True, progress=False
    )
    assert len(resumed.result.history) == 3
    assert resumed.network.device == torch.device("cpu")
    again = NeuralXMC(small_config(family, device="cuda", epochs=4)).fit(
        TEXTS, Y, LABELS, checkpoint_dir=tmp_path / "c", resume=True, progress=False
    )
    assert len(again.result.history) == 4
    assert {t.device.type for t in again.network.state_dict().values()} == {"cuda"}


@pytest.mark.gpu
def test_gpu_sentence_embeddings_match_the_cpu_and_are_cached_apart():
    from gandalf_xmc import sentence

    texts = [f"package number {i} for the terminal" for i in range(sentence.CACHE_MIN_TEXTS)]
    cpu = sentence.embed(texts, precision="float32")
    gpu = sentence.embed(texts, precision="float32", device="cuda")
    assert (np.sum(cpu * gpu, axis=1) > 0.9999).all()
    np.testing.assert_array_equal(sentence.embed(texts, precision="float32"), cpu)  # the CPU's cache file, not the GPU's
    assert len(list((sentence.cache_dir() / "minilm").glob("*-cuda.npy"))) >= 1


@pytest.mark.gpu
@pytest.mark.parametrize("family", ["astec", "inceptionxml", "inceptionxml-lf", "dual-encoder"])
def test_gpu_train_from_the_command_line_records_the_device(tiny_dir, tmp_path, capsys, family):
    # through the pipeline: checkpoints written on the GPU, the best epoch read back, then the final run
    out = tmp_path / "m"
    code, _, err = run_cli(
        ["train", "--data", str(tiny_dir), "--model", family, "--device", "cuda", "--epochs", "2", "--out", str(out)], capsys
    )
    assert code == 0, err
    assert json.loads((out / "model.json").read_text())["result"]["device"].startswith("cuda (")
    code, out_text, err = run_cli(["predict", str(out), "--text", "red apple", "-k", "2", "--json"], capsys)
    assert code == 0, err
