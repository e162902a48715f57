#!/usr/bin/env bash
# The GPU machine has no iproute2, which scripts/emulated_cluster.sh needs (ip, tc); its kernel has network
# namespaces, veth and tc's tbf. This unpacks Debian's iproute2 and the libraries it links into .net/ (git-ignored,
# about 12 MiB) with wrappers in .net/bin, to be named in the device tool's carry and put first on PATH there:
#   bench/rounds/stage_iproute2.sh             (here, once)
#   run: export PATH=$PWD/.net/bin:$PATH; ... scripts/emulated_cluster.sh ...   (carry: .net)
# Needs apt-get download and dpkg (Debian).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
net="$root/.net"
rm -rf "$net"
mkdir -p "$net/debs" "$net/root" "$net/bin"
(cd "$net/debs" && apt-get download iproute2 libbpf1 libbsd0 libcap2 libdb5.3 libelf1 libmnl0 libselinux1 libtirpc3 \
  libxtables12 libmd0 libpcre2-8-0 libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libcom-err2 \
  libkeyutils1 zlib1g libzstd1 >/dev/null 2>&1) || { echo "stage_iproute2: apt-get download failed" >&2; exit 1; }
for deb in "$net"/debs/*.deb; do dpkg -x "$deb" "$net/root"; done
rm -rf "$net/debs"
for tool in ip tc; do
  path=""
  for candidate in bin/$tool sbin/$tool; do [ -x "$net/root/$candidate" ] && path=$candidate && break; done
  [ -n "$path" ] || { echo "stage_iproute2: no $tool in the package" >&2; exit 1; }
  cat >"$net/bin/$tool" <<WRAP
#!/bin/sh
root=\$(dirname "\$(readlink -f "\$0")")/../root
LD_LIBRARY_PATH=\$root/lib/x86_64-linux-gnu:\$root/usr/lib/x86_64-linux-gnu exec "\$root/$path" "\$@"
WRAP
  chmod +x "$net/bin/$tool"
done
"$net/bin/ip" -V
