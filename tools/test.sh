#!/usr/bin/env bash
# Every test: install dependencies, check the C format of core/ and fs/,
# build with warnings as errors, run all
# suites (unit, cli, mount), then the unit tests again under ASan+UBSan and
# under valgrind, and a subset of the mount tests with the daemon under
# valgrind. Mount tests skip (exit 77) where /dev/fuse is unavailable.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each stage's header says when it started: CI has 20 minutes on 2 cores,
# and the log shows where they went.
stage() { printf '== %s (at %d:%02d)\n' "$1" $((SECONDS / 60)) $((SECONDS % 60)); }

stage "dependencies"
tools/deps.sh

stage "format (clang-format with .clang-format, core/ and fs/)"
tools/check-format.sh

stage "build (warnings are errors)"
rm -rf build-test build-test-san
meson setup build-test -Dtests=enabled >/dev/null
ninja -C build-test

stage "tests"
meson test -C build-test --print-errorlogs

stage "unit and CLI tests under AddressSanitizer + UndefinedBehaviorSanitizer"
meson setup build-test-san -Dtests=enabled -Db_sanitize=address,undefined \
	-Db_lundef=false >/dev/null
ninja -C build-test-san
# The CLI tests run imatch itself under the sanitizers: every command's
# paths, not only the library's units.
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
	meson test -C build-test-san --print-errorlogs --suite unit --suite cli

stage "unit tests under valgrind"
# --fair-sched=yes: valgrind runs one thread at a time, and by default a
# thread leaving a system call may take the lock straight back; test_beneath's
# swapper (renames in a loop) then starved the opening thread for minutes
# (3 s one run, 352 s the next; with a ticket lock, 3.5 s every time).
CK_FORK=no meson test -C build-test --print-errorlogs --suite unit \
	--timeout-multiplier=4 \
	--wrap='valgrind --quiet --fair-sched=yes --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect --error-exitcode=1'

stage "fuzz targets of the extractors, 8 s each, two at a time (tests/fuzz)"
extractors="sniff pdf zipdoc unpack terms html rtf msoffice zipxml"
readers="lexicon state planline keep stage records shard toolrecs manifest df export"
rm -rf build-test-fuzz
CC=clang meson setup build-test-fuzz -Dfuzz=enabled -Dtests=enabled \
	-Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
fz=build-test-fuzz/tests/fuzz
# The fuzz targets alone: the TSan stage builds the whole tree with clang.
ninja --quiet -C build-test-fuzz $(for t in $extractors $readers; do
	echo "tests/fuzz/fuzz_$t"
done)

# One fuzzer per core: `fuzz T SECONDS SEEDS [OPTION...]` in the background,
# at most two at once; `fuzz_wait` waits for the rest. `wait -n` returns a
# failed fuzzer's status, so set -e stops the run on the first finding.
fuzzing=0
fuzz() {
	local t=$1 secs=$2 seeds=$3
	shift 3
	{
		UBSAN_OPTIONS=halt_on_error=1 "$fz/fuzz_$t" -max_total_time="$secs" \
			-max_len=65536 -rss_limit_mb=2048 "$@" "$seeds" 2>&1 |
			tail -1 | sed "s/^/fuzz_$t: /"
	} &
	fuzzing=$((fuzzing + 1))
	if [ "$fuzzing" -ge 2 ]; then
		wait -n
		fuzzing=$((fuzzing - 1))
	fi
}
fuzz_wait() {
	while [ "$fuzzing" -gt 0 ]; do
		wait -n
		fuzzing=$((fuzzing - 1))
	done
}

# zipdoc and msoffice take the format from the input's first byte
# (tests/fuzz/fuzz_extract.c): their seeds are the fixtures of each format
# behind that byte, or no seed would even open as a ZIP or compound file.
selector() {
	case $1:$2 in
	zipdoc:*.docx | msoffice:*.doc) echo 0 ;;
	zipdoc:*.xlsx | msoffice:*.xls) echo 1 ;;
	zipdoc:*.pptx) echo 2 ;;
	zipdoc:*.odt | zipdoc:*.ods | zipdoc:*.odp) echo 3 ;;
	zipdoc:*.epub) echo 4 ;;
	esac
}
# Seeds: the format fixtures, copied (the fuzzers add to their directory).
seeds=$(mktemp -d)
for t in $extractors; do
	mkdir "$seeds/$t"
	if [ "$t" = zipxml ]; then
		# The XML parts of each docx, odt, odp and pptx, which it zips itself.
		python3 tests/fuzz/make_zipxml_seeds.py tests/data/formats "$seeds/$t"
	elif [ "$t" = zipdoc ] || [ "$t" = msoffice ]; then
		for f in tests/data/formats/*; do
			b=$(selector "$t" "$f")
			[ -n "$b" ] || continue
			{ printf "\\$b"; cat "$f"; } >"$seeds/$t/${f##*/}"
		done
	else
		cp tests/data/formats/* "$seeds/$t"/
	fi
	fuzz "$t" 8 "$seeds/$t"
done
fuzz_wait
rm -rf "$seeds"

stage "fuzz targets of the files imatch reads back, 4 s each, two at a time (tests/fuzz)"
# Lexicon, state cache, plan lines, keep rules, stage files, their records,
# shard lists, and the tools' own stage files (manifests, df runs, export
# parts) and their records: seeds made by imatch itself (make_seeds.sh; the
# formats are versioned, so seeds kept in the tree would go stale), in a
# temporary directory the fuzzers add to.
seeds=$(mktemp -d)
tests/fuzz/make_seeds.sh build-test/tools/imatch "$seeds"
for t in $readers; do
	fuzz "$t" 4 "$seeds/$t" -timeout=10
done
fuzz_wait
rm -rf "$seeds"

# The tests above mount with -o auto_unmount; without it (a plain `imatchfs
# SRC MNT`) the kernel opens directories alone (fs/ops.c, no_opendir) and
# keeps every listing: the tests of the kernel's caches again in that mode.
stage "mount tests without auto_unmount (directories opened by the kernel)"
TEST_AUTO_UNMOUNT=0 meson test -C build-test --print-errorlogs --suite mount \
	change_after_walk plan_cached_and_invalidated redundant_follows_the_source \
	dup_dirs_follow_the_source directory_rename editor_patterns \
	name_taken_at_once concurrent_readers copy_whole_view \
	dupes_equal_imatch_dupes dupes_follow_a_burst_of_removals \
	view_equals_scan new_subdirectory delete rename_file stress_churn \
	stress_symlink_race

# The daemon under valgrind (TEST_WITH_VALGRIND=1, tests/mount/util.py): no
# error and no definite leak, or the daemon exits 99 and the test fails. A
# subset that reaches most of the daemon in about two minutes: invalidation
# after a walk, editors' renames, a name taken at once, directory renames, hard links, a mount
# inside SOURCE, long names, signals with files held open, a restart from
# the cache, the generated files, dupes/, redundant/, concurrent readers.
stage "mount tests with the daemon under valgrind"
TEST_WITH_VALGRIND=1 meson test -C build-test --print-errorlogs --suite mount \
	--timeout-multiplier=5 change_after_walk editor_patterns name_taken_at_once \
	directory_rename hard_links mountpoint_inside_source long_member_names \
	signals_unmount restart_from_cache by_doc_file_signatures_status \
	dupes_equal_imatch_dupes dupes_follow_a_burst_of_removals \
	dupes_follow_a_lexicon_rebuild redundant_follows_the_source \
	concurrent_readers copy_whole_view plan_cached_and_invalidated

# ThreadSanitizer (clang): the threaded unit tests, scans on several threads
# and the daemon under churn, kills and concurrent readers. A report makes
# the process exit 66: the unit test, the CLI run or the daemon fails its
# test (tests/mount/util.py wants exit 0 at unmount). tests/tsan.supp holds
# the reports triaged as safe, each with its reason.
stage "threads under ThreadSanitizer: threaded units, scan -j, the daemon"
# The whole tree is built with clang here, warnings as errors: clang warns
# where gcc does not (an unused static inline function, say).
rm -rf build-test-tsan
CC=clang meson setup build-test-tsan -Dtests=enabled -Db_sanitize=thread \
	-Dwerror=true -Db_lundef=false >/dev/null
ninja --quiet -C build-test-tsan
export TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp second_deadlock_stack=1"
CK_FORK=no meson test -C build-test-tsan --print-errorlogs --suite unit \
	index-threads beneath lock scan state exact
meson test -C build-test-tsan --print-errorlogs --suite cli \
	scan_deterministic dedupe_exact_head names_shared_name ls_parallel
meson test -C build-test-tsan --print-errorlogs --suite mount \
	--timeout-multiplier=3 change_after_walk editor_patterns \
	name_taken_at_once directory_rename hard_links signals_unmount \
	restart_from_cache dupes_follow_a_burst_of_removals \
	redundant_follows_the_source concurrent_readers copy_whole_view \
	plan_cached_and_invalidated stress_kill stress_churn \
	stress_symlink_race
unset TSAN_OPTIONS
stage "done"
