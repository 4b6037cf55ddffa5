#!/usr/bin/env sh
# The adapter's serving certificate without cert-manager: a CA and a
# certificate for gpuscale-adapter.<namespace>.svc (openssl), the Secret
# gpuscale-adapter-tls, and the APIService's caBundle.
#
#   make-tls.sh [--namespace NS] [--days N] [--out DIR]
#
# With --out, only writes ca.crt, tls.crt and tls.key into DIR (no kubectl).
# Run it again before the certificate expires (default 365 days); the
# adapter reloads the Secret's files without a restart.
set -eu
ns=gpuscale
days=365
out=""
while [ $# -gt 0 ]; do
    case "$1" in
        --namespace) ns="$2"; shift 2 ;;
        --days) days="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        *) echo "make-tls.sh: unknown argument $1 (--namespace NS, --days N, --out DIR)" >&2; exit 2 ;;
    esac
done
dir="${out:-$(mktemp -d)}"
mkdir -p "$dir"
svc="gpuscale-adapter.$ns.svc"

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
    -subj "/CN=gpuscale-ca" -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -subj "/CN=$svc" -keyout "$dir/tls.key" -out "$dir/tls.csr" 2>/dev/null
printf 'subjectAltName=DNS:gpuscale-adapter,DNS:gpuscale-adapter.%s,DNS:%s,DNS:%s.cluster.local\nextendedKeyUsage=serverAuth\n' \
    "$ns" "$svc" "$svc" > "$dir/ext.cnf"
openssl x509 -req -in "$dir/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
    -days "$days" -extfile "$dir/ext.cnf" -out "$dir/tls.crt" 2>/dev/null
rm -f "$dir/tls.csr" "$dir/ext.cnf" "$dir/ca.srl"
# The CA key signs nothing else: drop it.
rm -f "$dir/ca.key"

if [ -n "$out" ]; then
    echo "wrote $dir/ca.crt $dir/tls.crt $dir/tls.key"
    exit 0
fi
kubectl -n "$ns" create secret tls gpuscale-adapter-tls \
    --cert="$dir/tls.crt" --key="$dir/tls.key" --dry-run=client -o yaml | kubectl apply -f -
kubectl patch apiservice v1beta1.external.metrics.k8s.io --type merge \
    -p "{\"spec\":{\"caBundle\":\"$(base64 < "$dir/ca.crt" | tr -d '\n')\"}}"
rm -rf "$dir"
