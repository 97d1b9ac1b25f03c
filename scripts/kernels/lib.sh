# Sourced by the kernel matrix's scripts (docs/kernels.md): where the Debian
# kernels come from, how they are fetched and cached, and the initramfs that
# boots them with the host's root over 9p.
#
# The kernels come from extra suites of the Debian mirror this machine's apt
# already uses (read from its configuration, so no host name is written
# here), through a private apt state: the machine's own apt lists, cache and
# sources are never touched, and nothing is installed.

KERNELS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KERNELS_CACHE=${MEMTRACE_KERNELS_CACHE:-/var/cache/memtrace-kernels}

kdie() {
	echo "kernels: $*" >&2
	exit 2
}

# kernel_known KVER ARCH: the kernels of the matrix, and the suite each
# comes from ("security" suites are on the security archive's URI).
kernel_suite() {
	case "$1" in
	5.10) echo bullseye-security ;;
	6.1) echo bookworm ;;
	6.12) echo trixie ;;
	*) return 1 ;;
	esac
}

# apt_entries prints "URI<TAB>SUITE<TAB>SIGNED-BY" for each deb entry the
# machine's apt reads: deb822 .sources files and one-line .list files.
apt_entries() {
	local f
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -e "$f" ] || continue
		awk -v RS= '{
			types = ""; uris = ""; suites = ""; sb = ""; enabled = "yes"
			n = split($0, L, "\n")
			for (i = 1; i <= n; i++) {
				l = L[i]
				if (l ~ /^#/ || !match(l, /^[A-Za-z-]+:/)) continue
				k = tolower(substr(l, 1, RLENGTH - 1)); v = substr(l, RLENGTH + 1)
				gsub(/^[ \t]+|[ \t]+$/, "", v)
				if (k == "types") types = v
				if (k == "uris") uris = v
				if (k == "suites") suites = v
				if (k == "signed-by") sb = v
				if (k == "enabled") enabled = tolower(v)
			}
			if (types !~ /(^| )deb( |$)/ || enabled == "no") next
			nu = split(uris, U, " "); ns = split(suites, S, " ")
			for (a = 1; a <= nu; a++) for (b = 1; b <= ns; b++) printf "%s\t%s\t%s\n", U[a], S[b], sb
		}' "$f"
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -e "$f" ] || continue
		awk '$1 == "deb" {
			sb = ""; i = 2
			if ($2 ~ /^\[/) {
				for (; i <= NF; i++) {
					if ($i ~ /^\[?signed-by=/) { sb = $i; sub(/^\[?signed-by=/, "", sb); sub(/\]$/, "", sb) }
					if ($i ~ /\]$/) { i++; break }
				}
			}
			printf "%s\t%s\t%s\n", $i, $(i + 1), sb
		}' "$f"
	done
}

# apt_uri SUITE prints "URI<TAB>SIGNED-BY" of the archive that carries SUITE:
# the one the machine's apt uses for its own -security suite for a security
# suite, else the one of its release suite (a suite without a dash).
# MEMTRACE_KERNELS_MIRROR / MEMTRACE_KERNELS_SECURITY_MIRROR override them.
apt_uri() {
	local suite=$1 want line
	case "$suite" in
	*-security)
		if [ -n "${MEMTRACE_KERNELS_SECURITY_MIRROR:-}" ]; then
			printf '%s\t\n' "$MEMTRACE_KERNELS_SECURITY_MIRROR"
			return
		fi
		want='-security$'
		;;
	*)
		if [ -n "${MEMTRACE_KERNELS_MIRROR:-}" ]; then
			printf '%s\t\n' "$MEMTRACE_KERNELS_MIRROR"
			return
		fi
		want='^[a-z]+$'
		;;
	esac
	line=$(apt_entries | awk -F'\t' -v w="$want" '$2 ~ w && $1 ~ /^(https?|file):/ { print $1 "\t" $3; exit }')
	[ -n "$line" ] || kdie "no Debian archive for $suite in the machine's apt sources (/etc/apt); set MEMTRACE_KERNELS_MIRROR or MEMTRACE_KERNELS_SECURITY_MIRROR"
	printf '%s\n' "$line"
}

# papt DIR COMMAND ARGS...: apt-get or apt-cache with DIR's private sources,
# lists and cache.
papt() {
	local d=$1 cmd=$2
	shift 2
	"$cmd" -q -o Dir::Etc::SourceList="$d/sources.list" -o Dir::Etc::SourceParts=/dev/null \
		-o Dir::State::Lists="$d/lists" -o Dir::Cache="$d/cache" \
		-o APT::Architecture="$KARCH" -o APT::Architectures="$KARCH" \
		-o Acquire::Languages=none -o APT::Sandbox::User=root \
		-o Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false \
		-o Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false \
		-o Acquire::IndexTargets::deb::DEP-11-icons-hidpi::DefaultEnabled=false "$@"
}

# apt_update SUITE: the private lists of SUITE for $KARCH, fetched once.
# Prints the private apt directory.
apt_update() {
	local suite=$1 d line uri sb key
	d=$KERNELS_CACHE/apt/$suite-$KARCH
	if [ -f "$d/updated" ]; then
		echo "$d"
		return
	fi
	line=$(apt_uri "$suite")
	uri=${line%%$'\t'*}
	sb=${line#*$'\t'}
	mkdir -p "$d/lists/partial" "$d/cache/archives/partial"
	# The machine's keyring first; Debian's archive keyring (which holds
	# the keys of every suite of the matrix) when that one cannot check
	# the older or newer suite's Release file.
	for key in $sb /usr/share/keyrings/debian-archive-keyring.gpg; do
		[ -f "$key" ] || continue
		printf 'deb [signed-by=%s] %s %s main\n' "$key" "$uri" "$suite" >"$d/sources.list"
		if papt "$d" apt-get update -qq -o APT::Update::Error-Mode=any >&2; then
			touch "$d/updated"
			echo "$d"
			return
		fi
	done
	kdie "apt-get update of $suite failed (see above)"
}

# kernel_root KVER: the extracted kernel package of KVER for $KARCH, fetched
# and unpacked on first use (apt-get download and dpkg-deb -x: never
# installed). Prints its directory, holding boot/vmlinuz-* and the modules.
kernel_root() {
	local kver=$1 suite d pkg kdir tmp deb re rel
	suite=$(kernel_suite "$kver") || kdie "unknown kernel $kver: the matrix has 5.10, 6.1 and 6.12"
	kdir=$KERNELS_CACHE/$KARCH/$kver
	if [ -f "$kdir/package" ] && [ -d "$kdir/root" ]; then
		echo "$kdir"
		return
	fi
	d=$(apt_update "$suite")
	# The flavour's image (signed or not, each has vmlinuz and the modules),
	# not cloud, rt or dbg; the newest ABI of the series.
	re="^linux-image-${kver//./\\.}[.-][^ ]*-$KFLAVOUR(-unsigned)?\$"
	pkg=$(papt "$d" apt-cache pkgnames linux-image- | grep -E "$re" | grep -vE -- '-(cloud|rt)-' |
		sort -uV | awk -v f="$KFLAVOUR" '{ base = $0; sub(/-unsigned$/, "", base); if (!(base in seen)) { seen[base]; order[++n] = base } pkgs[$0] }
			END { if (n == 0) exit; b = order[n]; print ((b in pkgs) ? b : b "-unsigned") }')
	[ -n "$pkg" ] || kdie "no linux-image-$kver package for $KARCH in $suite"
	echo "kernels: fetching $pkg ($suite, $KARCH)" >&2
	tmp=$(mktemp -d "$KERNELS_CACHE/.fetch.XXXXXX")
	(cd "$tmp" && papt "$d" apt-get download -qq "$pkg" >&2) || {
		rm -rf "$tmp"
		kdie "apt-get download $pkg failed"
	}
	deb=$(ls "$tmp"/*.deb)
	mkdir -p "$tmp/root"
	dpkg-deb -x "$deb" "$tmp/root" || kdie "dpkg-deb -x $deb failed"
	ls "$tmp"/root/boot/vmlinu[xz]-* >/dev/null 2>&1 || kdie "$pkg has no kernel image in /boot"
	# The package leaves modules.dep to depmod at install: made here, in
	# the copy (/lib/modules as depmod -b expects, where the package has
	# only /usr/lib/modules).
	rel=$(ls "$tmp"/root/boot/vmlinu[xz]-* | head -1)
	rel=${rel##*/vmlinu?-}
	if [ ! -d "$tmp/root/lib/modules/$rel" ] && [ -d "$tmp/root/usr/lib/modules/$rel" ]; then
		mkdir -p "$tmp/root/lib"
		ln -s ../usr/lib/modules "$tmp/root/lib/modules"
	fi
	depmod -b "$tmp/root" "$rel" || kdie "depmod for $pkg failed"
	dpkg-deb --showformat='${Package} ${Version}\n' -W "$deb" >"$tmp/package"
	rm -f "$deb"
	rm -rf "$kdir"
	mkdir -p "$(dirname "$kdir")"
	mv "$tmp" "$kdir"
	echo "$kdir"
}

# kernel_files KDIR: sets KIMAGE (the kernel image) and KMODS (its
# /lib/modules/RELEASE directory) of an extracted kernel package.
kernel_files() {
	local kdir=$1
	KIMAGE=$(ls "$kdir"/root/boot/vmlinu[xz]-* | head -1)
	KRELEASE=${KIMAGE##*/vmlinu?-}
	KMODS=
	for KMODS in "$kdir/root/lib/modules/$KRELEASE" "$kdir/root/usr/lib/modules/$KRELEASE"; do
		[ -d "$KMODS" ] && break
	done
	[ -f "$KMODS/modules.dep" ] || kdie "no modules.dep for $KRELEASE in $kdir"
}

# modules_for KMODS NAME...: the module files NAME... need, dependencies
# first, for the ones that are modules on this kernel (built-ins need none).
modules_for() {
	local mods=$1
	shift
	awk -v want="$*" '
		function base(p) { sub(/.*\//, "", p); sub(/\.ko(\.(xz|zst|gz))?$/, "", p); gsub(/-/, "_", p); return p }
		FILENAME ~ /modules\.builtin$/ { builtin[base($0)] = 1; next }
		{ f = $1; sub(/:$/, "", f); path[base(f)] = f; deps[base(f)] = ""
		  for (i = 2; i <= NF; i++) deps[base(f)] = deps[base(f)] " " base($i) }
		function add(m,   n, d, i) {
			if (m in done) return
			done[m] = 1
			if (!(m in path)) { if (!(m in builtin)) missing = missing " " m; return }
			n = split(deps[m], d, " ")
			for (i = n; i >= 1; i--) add(d[i])
			print path[m]
		}
		END { n = split(want, w, " "); for (i = 1; i <= n; i++) add(w[i])
		      if (missing != "") { print "kernels: not in this kernel: " missing > "/dev/stderr"; exit 1 } }
	' "$mods/modules.builtin" "$mods/modules.dep"
}

# GUEST_MODULES: what the guest needs: the virtio PCI transport, 9p over
# virtio (and netfs/fscache where 9p needs them), virtio's RNG so that
# getrandom never waits at boot.
GUEST_MODULES="virtio_pci 9pnet_virtio 9p virtio_rng"

# kernel_arch: KARCH and KFLAVOUR (Debian's names) of
# MEMTRACE_KERNEL_ARCH: amd64 (the default) or arm64.
kernel_arch() {
	KARCH=${MEMTRACE_KERNEL_ARCH:-amd64}
	case "$KARCH" in
	amd64 | arm64) KFLAVOUR=$KARCH ;;
	*) kdie "MEMTRACE_KERNEL_ARCH=$KARCH: the matrix has amd64 and arm64" ;;
	esac
}

# guest_busybox: a static busybox for $KARCH: the machine's own for its
# architecture (busybox-static), else Debian's busybox-static of $KARCH,
# downloaded once into the cache with the private apt state.
guest_busybox() {
	local d bb=$KERNELS_CACHE/$KARCH/busybox tmp
	if [ "$KARCH" = "$(dpkg --print-architecture)" ]; then
		bb=$(command -v busybox) || kdie "no busybox: make deps installs busybox-static"
		readelf -d "$bb" 2>/dev/null | grep -q NEEDED && kdie "$bb is not static: make deps installs busybox-static"
		echo "$bb"
		return
	fi
	if [ ! -x "$bb" ]; then
		d=$(apt_update bookworm)
		tmp=$(mktemp -d "$KERNELS_CACHE/.fetch.XXXXXX")
		(cd "$tmp" && papt "$d" apt-get download -qq busybox-static >&2 && dpkg-deb -x busybox-static_*.deb x) ||
			kdie "apt-get download busybox-static ($KARCH) failed"
		mv "$tmp/x/bin/busybox" "$bb"
		rm -rf "$tmp"
	fi
	echo "$bb"
}

# GUEST_ROOT_PACKAGES: the libraries the test programs run against in a
# guest of another architecture, and libc6-dbg, whose debug files
# (/usr/lib/debug/.build-id) name libc's internal functions and
# start_thread, which Debian's libc6 keeps no symbol table for.
GUEST_ROOT_PACKAGES="libc6 libc6-dbg libgcc-s1 libstdc++6"

# host_suite: the Debian suite this machine runs, the one make deps's cross
# toolchain (libc6-dev-arm64-cross) is built from: the guest's libraries of
# that suite are what the cross-built programs were linked against.
host_suite() {
	local s
	s=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
	[ -n "$s" ] || kdie "no VERSION_CODENAME in /etc/os-release: cannot tell which suite's $KARCH libraries to fetch"
	echo "$s"
}

# guest_root: for a guest of another architecture, Debian's own
# $GUEST_ROOT_PACKAGES of $KARCH from the machine's suite, downloaded with
# the private apt state and unpacked (never installed) once into
# $KERNELS_CACHE/$KARCH/root: its lib/ and usr/lib/ become the guest's
# (init, "cross"). Prints the directory; "packages" there lists what it
# holds.
guest_root() {
	local r=$KERNELS_CACHE/$KARCH/root suite d tmp deb try
	if [ -f "$r/packages" ]; then
		echo "$r"
		return
	fi
	suite=$(host_suite) || exit 2
	echo "kernels: fetching $GUEST_ROOT_PACKAGES ($suite, $KARCH)" >&2
	tmp=$(mktemp -d "$KERNELS_CACHE/.fetch.XXXXXX")
	# Lists fetched long ago may name versions the mirror no longer has:
	# one update of them, then a second try.
	for try in 1 2; do
		d=$(apt_update "$suite") || {
			rm -rf "$tmp"
			exit 2
		}
		(cd "$tmp" && papt "$d" apt-get download -qq $GUEST_ROOT_PACKAGES >&2) && break
		rm -f "$tmp"/*.deb "$d/updated"
		if [ $try = 2 ]; then
			rm -rf "$tmp"
			kdie "apt-get download $GUEST_ROOT_PACKAGES ($suite, $KARCH) failed"
		fi
	done
	mkdir -p "$tmp/root"
	for deb in "$tmp"/*.deb; do
		dpkg-deb -x "$deb" "$tmp/root" || kdie "dpkg-deb -x $deb failed"
		dpkg-deb --showformat='${Package} ${Version}\n' -W "$deb" >>"$tmp/root/packages"
	done
	# A merged-/usr suite's libc6 has its files under usr/lib only.
	if [ ! -e "$tmp/root/lib" ] && [ -d "$tmp/root/usr/lib" ]; then
		ln -s usr/lib "$tmp/root/lib"
	fi
	[ "$KARCH" != arm64 ] || [ -e "$tmp/root/lib/ld-linux-aarch64.so.1" ] ||
		kdie "libc6 ($suite, $KARCH) has no ld-linux-aarch64.so.1 in /lib"
	rm -rf "$r"
	mv "$tmp/root" "$r"
	rm -rf "$tmp"
	echo "$r"
}

# build_initramfs KMODS OUT: a cpio with a static busybox, the guest's
# modules (uncompressed: busybox's insmod takes plain .ko) and /init.
build_initramfs() {
	local mods=$1 out=$2 d m f busybox list
	busybox=$(guest_busybox) || exit 2
	d=$(mktemp -d)
	mkdir -p "$d/bin" "$d/lib/modules" "$d/proc" "$d/sys" "$d/dev" "$d/newroot"
	cp "$busybox" "$d/bin/busybox"
	cp "$KERNELS_DIR/init" "$d/init"
	chmod 755 "$d/init"
	: >"$d/lib/modules/order"
	list=$(modules_for "$mods" $GUEST_MODULES) || exit 2
	for m in $list; do
		f=$(basename "$m")
		case "$f" in
		*.xz) xz -dc "$mods/$m" >"$d/lib/modules/${f%.xz}" ;;
		*.zst) zstd -qdc "$mods/$m" >"$d/lib/modules/${f%.zst}" ;;
		*.gz) gzip -dc "$mods/$m" >"$d/lib/modules/${f%.gz}" ;;
		*) cp "$mods/$m" "$d/lib/modules/$f" ;;
		esac
		f=${f%.xz}
		f=${f%.zst}
		echo "${f%.gz}" >>"$d/lib/modules/order"
	done
	(cd "$d" && find . | LC_ALL=C sort | busybox cpio -o -H newc 2>/dev/null) >"$out"
	rm -rf "$d"
}
