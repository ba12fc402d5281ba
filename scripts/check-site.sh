#!/usr/bin/env bash
# Checks a benchmark run's site in headless Chromium.
#
#   scripts/check-site.sh [DIR]
#
# DIR is the output folder of a `sesame bench` run (its index.html,
# explore.html and one folder per experiment). Without DIR, a run of every
# experiment is made first into target/check-site, at the scale
# $SESAME_CHECK_SITE_SCALE names (`quick` by default: about two minutes in
# a release build; `tiny`: the harness's own test scale, every page and
# chart with fewer points, about twenty seconds in a debug build; data sets
# from $SESAME_DATA, default data/), with the binary $SESAME_BIN when it is
# set (the test command passes the one its test build made, which spares a
# release build), else a release build of the CLI.
#
# Every page is opened with the fragment #selfcheck: its inlined check
# reads the charts as drawn, panel by panel (both axes with tick labels and
# names, at least one data series, no colour used by two series of a
# panel, every category of a bar chart named under its x axis, the paper's
# series wherever the rows carry the paper's values) and, on explore.html, drives the page (experiment picker,
# filters, paper overlay, log axis, sorting) and writes its verdict into
# the page. The verdict is read from the DOM (--dump-dom); console
# messages, which the pages make none of, are read from Chromium's log and
# count as errors. Screenshots go to DIR/screenshots/.
#
# Without Chromium (chromium, chromium-browser, google-chrome, or
# $CHROMIUM) the check prints a note and passes, unless
# SESAME_CHECK_SITE_REQUIRE=1 (CI). Exit status 1 when a page fails.
set -euo pipefail
cd "$(dirname "$0")/.."

browser=${CHROMIUM:-}
if [ -z "$browser" ]; then
    for b in chromium chromium-browser google-chrome; do
        if command -v "$b" >/dev/null 2>&1; then
            browser=$(command -v "$b")
            break
        fi
    done
fi
if [ -z "$browser" ]; then
    if [ "${SESAME_CHECK_SITE_REQUIRE:-0}" = 1 ]; then
        echo "check-site: no Chromium found (set CHROMIUM, or apt-get install chromium)" >&2
        exit 1
    fi
    echo "note: Chromium not found: site check skipped (apt-get install chromium to run it)"
    exit 0
fi

dir=${1:-}
if [ -z "$dir" ]; then
    dir=target/check-site
    rm -rf "$dir"
    # SESAME_BIN: a `sesame` binary already built (the test command passes
    # the one its test build made); otherwise a release build.
    if [ -n "${SESAME_BIN:-}" ]; then
        sesame=("$SESAME_BIN")
    else
        sesame=(cargo run --release -q -p sesame-cli --)
    fi
    scale=${SESAME_CHECK_SITE_SCALE:-quick}
    case "$scale" in
        quick | tiny) ;;
        *)
            echo "check-site: SESAME_CHECK_SITE_SCALE is quick or tiny, not '$scale'" >&2
            exit 2
            ;;
    esac
    echo "check-site: sesame bench all --$scale --out $dir" >&2
    "${sesame[@]}" bench all "--$scale" \
        --data "${SESAME_DATA:-data}" --out "$dir" >"$dir.log" 2>&1 || {
        tail -n 30 "$dir.log" >&2
        echo "check-site: the bench run failed (log: $dir.log)" >&2
        exit 1
    }
fi
[ -f "$dir/index.html" ] || { echo "check-site: $dir/index.html is missing" >&2; exit 1; }
dir=$(cd "$dir" && pwd)
shots="$dir/screenshots"
mkdir -p "$shots"
profile=$(mktemp -d /tmp/sesame-check-site.XXXXXX)
trap 'rm -rf "$profile"' EXIT

pages=(index.html explore.html)
for p in "$dir"/*/index.html; do
    pages+=("${p#"$dir"/}")
done

# One headless Chromium run: the flags every call shares.
chrome() {
    "$browser" --headless --no-sandbox --disable-gpu --no-first-run \
        --user-data-dir="$profile" --enable-logging=stderr --v=0 \
        --virtual-time-budget=20000 "$@"
}

failed=0
for page in "${pages[@]}"; do
    url="file://$dir/$page"
    if [ ! -f "$dir/$page" ]; then
        echo "FAIL $page: missing"
        failed=1
        continue
    fi
    log="$profile/log"
    dom=$(chrome --dump-dom "$url#selfcheck" 2>"$log" || true)
    verdict=$(printf '%s' "$dom" | grep -o '<pre id="selfcheck">[^<]*' | head -n 1 \
        | sed 's/<pre id="selfcheck">//' || true)
    console=$(grep -a 'CONSOLE' "$log" || true)
    name=${page%/index.html}
    name=${name%.html}
    chrome --screenshot="$shots/$name.png" --window-size=1400,2400 --hide-scrollbars \
        "$url" >/dev/null 2>&1 || echo "note: no screenshot of $page"
    case "$verdict" in
        "selfcheck: ok"*)
            if [ -n "$console" ]; then
                echo "FAIL $page: console messages:"
                printf '%s\n' "$console" | sed 's/^/    /'
                failed=1
            else
                echo "ok   $page: ${verdict#selfcheck: ok: }"
            fi
            ;;
        "")
            echo "FAIL $page: no self-check verdict (the page did not run its script)"
            [ -n "$console" ] && printf '%s\n' "$console" | sed 's/^/    /'
            failed=1
            ;;
        *)
            echo "FAIL $page: ${verdict#selfcheck: }"
            failed=1
            ;;
    esac
done
echo "check-site: ${#pages[@]} pages checked; screenshots in $shots"
exit $failed
