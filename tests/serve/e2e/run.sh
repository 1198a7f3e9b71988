#!/bin/sh
# The browser test of kf serve (ctest ServeBrowserE2E): a demo database of 240 evaluations (+1 hostile), `kf serve`
# on a free port, and browser_test.cjs driving Debian's chromium headless through Playwright (npm package
# playwright-core, installed on first use into BUILD/serve-e2e/node; never committed).
# Prints "kf-e2e-skip: <why>" and exits 0 (ctest: skipped) when chromium, node/npm or the package are unavailable.
#   run.sh BUILD_DIR SOURCE_DIR
set -eu
BIN=$1
SRC=$2
OUT=$BIN/serve-e2e
PLAYWRIGHT_VERSION=1.65.1
mkdir -p "$OUT"
CHROMIUM=${KF_CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [ -z "$CHROMIUM" ] || [ ! -x "$CHROMIUM" ]; then echo "kf-e2e-skip: no chromium (apt-get install chromium)"; exit 0; fi
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then echo "kf-e2e-skip: no node/npm"; exit 0; fi
NODE_DIR=$OUT/node
PW=$NODE_DIR/node_modules/playwright-core
if ! grep -q "\"version\": \"$PLAYWRIGHT_VERSION\"" "$PW/package.json" 2>/dev/null; then
  mkdir -p "$NODE_DIR"
  if ! (cd "$NODE_DIR" && [ -f package.json ] || echo '{"private": true}' > package.json) ||
     ! (cd "$NODE_DIR" && timeout 300 npm install --no-audit --no-fund --no-save "playwright-core@$PLAYWRIGHT_VERSION" \
          > "$OUT/npm.log" 2>&1); then
    echo "kf-e2e-skip: npm install playwright-core@$PLAYWRIGHT_VERSION failed (offline?); see $OUT/npm.log"
    tail -5 "$OUT/npm.log" || true
    exit 0
  fi
fi

DB=$OUT/demo.sqlite3
rm -f "$DB" "$DB-wal" "$DB-shm" "$OUT"/*.png
"$BIN/tests/kf_serve_demo_db" "$DB" 240 > "$OUT/demo.json"
"$BIN/kf" serve --db "$DB" --port 0 > "$OUT/serve.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT INT TERM
i=0
until grep -qs "http://" "$OUT/serve.log"; do
  i=$((i + 1))
  if [ $i -gt 100 ] || ! kill -0 $SERVER 2>/dev/null; then echo "kf serve did not start:"; cat "$OUT/serve.log"; exit 1; fi
  sleep 0.1
done
URL=$(sed -n 's#^kf serve: \(http://[^ ]*\) .*#\1#p' "$OUT/serve.log" | head -n 1)
echo "server: $URL"
KF_PLAYWRIGHT=$PW KF_CHROMIUM=$CHROMIUM KF_URL=$URL KF_DEMO=$OUT/demo.json KF_OUT=$OUT KF_DB=$DB \
  KF_DEMO_DB_TOOL=$BIN/tests/kf_serve_demo_db node "$SRC/tests/serve/e2e/browser_test.cjs"
