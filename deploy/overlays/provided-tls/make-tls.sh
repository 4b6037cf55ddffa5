#!/usr/bin/env sh
# The adapter's serving certificate without cert-manager, made by hand
# (docs/install.md, "TLS"): a CA, made once and kept in the Secret
# gpuscale-adapter-ca (reused by every later run, so the APIServices'
# caBundle does not change), a certificate it signs for the Service's names
# (gpuscale-adapter.<namespace>.svc …) in the Secret gpuscale-adapter-tls,
# and the caBundle of every APIService backed by that Service (an
# APIService of another server is never touched).
#
#   make-tls.sh [--namespace NS] [--days N] [--out DIR]
#
# With --out, only writes ca.crt, ca.key, tls.crt and tls.key into DIR (no
# kubectl); a CA already in DIR is reused.
# Run it again before the certificate expires (default 365 days): the CA
# stays, the adapter reloads the Secret's files without a restart.
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
umask 077
dir="${out:-$(mktemp -d)}"
mkdir -p "$dir"
svc="gpuscale-adapter.$ns.svc"
ca_secret=gpuscale-adapter-ca

# The CA kept in the cluster, if any. A failed read stops the script (never
# taken for "no CA": a new CA would break discovery until the bundle moves).
if [ -z "$out" ]; then
    crt=$(kubectl -n "$ns" get secret "$ca_secret" --ignore-not-found -o 'jsonpath={.data.ca\.crt}')
    key=$(kubectl -n "$ns" get secret "$ca_secret" --ignore-not-found -o 'jsonpath={.data.ca\.key}')
    if [ -n "$crt" ] && [ -n "$key" ]; then
        printf '%s' "$crt" | base64 -d > "$dir/ca.crt"
        printf '%s' "$key" | base64 -d > "$dir/ca.key"
    fi
fi
if [ -s "$dir/ca.crt" ] && [ -s "$dir/ca.key" ]; then
    echo "make-tls.sh: reusing the CA ($(openssl x509 -in "$dir/ca.crt" -noout -enddate))"
else
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
        -subj "/CN=gpuscale-ca" -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
    echo "make-tls.sh: made a new CA"
fi
if ! openssl x509 -in "$dir/ca.crt" -noout -checkend "$((days * 86400))" >/dev/null; then
    echo "make-tls.sh: the CA expires within $days days. Delete the Secret $ca_secret (or DIR's ca.*) for a new one; the APIServices fail until the adapter serves the new certificate (or let the adapter manage its certificate: docs/install.md)" >&2
    exit 1
fi

openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -subj "/CN=$svc" -keyout "$dir/tls.key" -out "$dir/tls.csr" 2>/dev/null
printf 'subjectAltName=DNS:gpuscale-adapter,DNS:gpuscale-adapter.%s,DNS:%s,DNS:%s.cluster.local\nextendedKeyUsage=serverAuth\n' \
    "$ns" "$svc" "$svc" > "$dir/ext.cnf"
openssl x509 -req -in "$dir/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
    -days "$days" -extfile "$dir/ext.cnf" -out "$dir/tls.crt" 2>/dev/null
rm -f "$dir/tls.csr" "$dir/ext.cnf" "$dir/ca.srl"

if [ -n "$out" ]; then
    echo "wrote $dir/ca.crt $dir/ca.key $dir/tls.crt $dir/tls.key"
    exit 0
fi
kubectl -n "$ns" create secret generic "$ca_secret" \
    --from-file=ca.crt="$dir/ca.crt" --from-file=ca.key="$dir/ca.key" \
    --dry-run=client -o yaml | kubectl apply -f -
kubectl -n "$ns" create secret tls gpuscale-adapter-tls \
    --cert="$dir/tls.crt" --key="$dir/tls.key" --dry-run=client -o yaml | kubectl apply -f -
bundle=$(base64 < "$dir/ca.crt" | tr -d '\n')
kubectl get apiservices \
    -o 'jsonpath={range .items[*]}{.metadata.name} {.spec.service.namespace}/{.spec.service.name}{"\n"}{end}' \
    > "$dir/apiservices"
patched=0
while read -r name backing; do
    if [ "$backing" = "$ns/gpuscale-adapter" ]; then
        kubectl patch apiservice "$name" --type merge -p "{\"spec\":{\"caBundle\":\"$bundle\"}}"
        patched=$((patched + 1))
    fi
done < "$dir/apiservices"
rm -rf "$dir"
if [ "$patched" -eq 0 ]; then
    echo "make-tls.sh: no APIService is backed by the Service $ns/gpuscale-adapter: apply the overlay first, then run this again" >&2
    exit 1
fi
