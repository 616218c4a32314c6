#!/bin/sh
# Fetch the evaluation corpora: Debian documentation packages that nobody on
# this project wrote, downloaded with `apt-get download` and unpacked with
# `dpkg-deb -x` (nothing is installed). Idempotent; safe as root, no stdin.
#
#   tools/eval/fetch_corpus.sh [CACHE]      (default $IMATCH_EVAL_CACHE or /tmp/imatch-eval)
#
# Afterwards CACHE/corpus/ holds:
#   pg/     the PostgreSQL 15 HTML manual          (postgresql-doc-15)
#   perl/   Perl's pod pages, and its man1 and man3 pages as text      (perl-doc)
#   py/     the Python 3.11 HTML documentation, without its rst sources (python3.11-doc)
# and CACHE/corpus/main/ is all three as one tree (copies), the evaluation corpus
# (about 2,700 documents, 85 MB). EVAL_PY=0 leaves Python out.
set -eu
here=$(cd "$(dirname "$0")" && pwd)

cache=${1:-${IMATCH_EVAL_CACHE:-/tmp/imatch-eval}}
pkgs="postgresql-doc-15 perl-doc"
[ "${EVAL_PY:-1}" = 1 ] && pkgs="$pkgs python3.11-doc"

mkdir -p "$cache/debs" "$cache/root" "$cache/corpus"
cd "$cache/debs"
for p in $pkgs; do
	if ! ls "${p}"_*.deb >/dev/null 2>&1; then
		# As root, apt warns that it cannot drop to _apt for the download; harmless.
		apt-get download -q "$p" </dev/null >/dev/null 2>&1 ||
			{ apt-get update -q </dev/null >/dev/null 2>&1 && apt-get download -q "$p" </dev/null; } ||
			{ echo "fetch_corpus: cannot download $p" >&2; exit 1; }
	fi
	d="$cache/root/$p"
	if [ ! -d "$d" ]; then
		dpkg-deb -x "$(ls "${p}"_*.deb | head -n1)" "$d.tmp"
		mv "$d.tmp" "$d"
	fi
done

link() { # link NAME SRC_DIR: a clean tree of the documents only
	[ -d "$2" ] || { echo "fetch_corpus: $2 missing" >&2; exit 1; }
	rm -rf "$cache/corpus/$1"
	mkdir -p "$cache/corpus/$1"
	cp -r "$2"/. "$cache/corpus/$1/"
}
link pg "$cache/root/postgresql-doc-15/usr/share/doc/postgresql-doc-15/html"
# perl-doc: the pod pages (plain text with light markup), documentation only.
link perl "$cache/root/perl-doc/usr/share/perl/5.36.0/pod"
# The man pages, as text: pod2man's roff preamble is the same in every page and
# would make short pages similar through formatting alone (man2text.py).
# man3: the core modules' pages; man1: the same pages as pod/, rendered by
# pod2man -- real near-duplicates of the pod sources in another format.
python3 "$here/man2text.py" "$cache/root/perl-doc/usr/share/man/man3" "$cache/corpus/perl/man3"
python3 "$here/man2text.py" "$cache/root/perl-doc/usr/share/man/man1" "$cache/corpus/perl/man1"
find "$cache/corpus" -type f \( -name '*.gz' -o -name '*.png' -o -name '*.svg' -o -name '*.css' -o -name '*.js' \) -delete
rm -rf "$cache/corpus/py"
if [ "${EVAL_PY:-1}" = 1 ]; then
	link py "$cache/root/python3.11-doc/usr/share/doc/python3.11/html"
	rm -rf "$cache/corpus/py/_sources" "$cache/corpus/py/_static" "$cache/corpus/py/_images" "$cache/corpus/py/_downloads"
	find "$cache/corpus/py" -type f ! -name '*.html' -delete
fi
rm -rf "$cache/corpus/main"
mkdir -p "$cache/corpus/main"
for t in pg perl py; do
	[ -d "$cache/corpus/$t" ] && cp -r "$cache/corpus/$t" "$cache/corpus/main/$t"
done
echo "$cache/corpus"
