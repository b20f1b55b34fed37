#!/usr/bin/env bash
# The docs site builds with no warning: a page missing from the nav, a broken link or
# anchor, or a playbook field the reference cannot describe fails the build.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q '.[docs]'
NO_MKDOCS_2_WARNING=1 mkdocs build --strict --site-dir "${DOCS_SITE_DIR:-site}"
