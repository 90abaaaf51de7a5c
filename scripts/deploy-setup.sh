#!/usr/bin/env bash
# The first start of a secured deployment: a private CA, the broker's TLS certificate, the
# workers' client certificate, and the broker's accounts: the dynamic security plugin's file with the accounts
# of config/security/accounts.yaml and the accounts admin (scripts/broker-accounts.py init), and the workers'
# static ACL (scripts/broker-security.py). Docker Compose runs it in its `setup` service before the broker
# starts; `make run` runs it for its loopback broker. Only openssl and python3 with PyYAML;
# nothing is downloaded. Riders' and further vehicles' accounts come later, while the broker runs
# (scripts/broker-accounts.py add-rider).
#
#   scripts/deploy-setup.sh OUT [--hostname NAME]... [--accounts-file FILE] [--broker-uid UID] [--client-uid UID]
#
# Writes, keeping whatever is already there (a restart keeps its CA and its passwords; delete OUT to start
# over):
#   OUT/tls/ca.crt              the CA every client trusts (give it to riders' and vehicles' apps)
#   OUT/tls/ca.key              the CA's key (mode 600; in production, move it off the broker's host)
#   OUT/tls/broker.crt, .key    the broker's certificate, for broker, localhost, 127.0.0.1 and each --hostname
#   OUT/tls/worker.crt, .key    the workers' client certificate: common name `worker`, the account the
#                               broker gives it (use_identity_as_username)
#   OUT/secrets/<account>       the password of each account of accounts.yaml (mode 600)
#   OUT/accounts/accounts-admin the accounts admin's password: whoever holds it may change every account
#                               (scripts/broker-accounts.py --secrets OUT/accounts keeps riders' passwords there)
#   OUT/dynamic-security.json   the plugin's file (or --accounts-file: Compose puts it in a volume the broker
#                               may write, since the plugin rewrites it on every change)
#   OUT/acl                     the static ACL of the workers' certificate listener (scripts/broker-security.py,
#                               which also writes OUT/passwords for a deployment without the plugin)
# --broker-uid and --client-uid (as root) hand the broker's files to the broker's user and the clients'
# secrets to the user the worker and simulator run as (the eclipse-mosquitto image runs as 1883; the
# project's image as 10001).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { grep -m1 '^#   scripts/deploy-setup.sh' "$0" | sed 's/^# *//' >&2; exit 2; }
[ $# -ge 1 ] || usage
out=$1
shift
hostnames=(broker localhost)
accounts_file=""
broker_uid=""
client_uid=""
while [ $# -gt 0 ]; do
    case "$1" in
        --hostname) hostnames+=("$2"); shift 2 ;;
        --accounts-file) accounts_file=$2; shift 2 ;;
        --broker-uid) broker_uid=$2; shift 2 ;;
        --client-uid) client_uid=$2; shift 2 ;;
        *) usage ;;
    esac
done
days=${CERTIFICATE_DAYS:-825}
tls=$out/tls
mkdir -p "$tls"
chmod 755 "$out" "$tls"

say() { printf 'deploy-setup: %s\n' "$*"; }

# A key (mode 600) and a certificate signed by the CA, unless both exist.
issue() {
    local name=$1 subject=$2 extensions=$3
    [ -s "$tls/$name.crt" ] && [ -s "$tls/$name.key" ] && return 0
    (umask 077 && openssl genrsa -out "$tls/$name.key" 2048 2>/dev/null)
    openssl req -new -key "$tls/$name.key" -subj "$subject" -out "$tls/$name.csr"
    printf '%s\n' "$extensions" > "$tls/$name.ext"
    openssl x509 -req -in "$tls/$name.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" -CAcreateserial \
        -days "$days" -sha256 -extfile "$tls/$name.ext" -out "$tls/$name.crt" 2>/dev/null
    rm -f "$tls/$name.csr" "$tls/$name.ext"
    say "issued $name.crt ($subject)"
}

if [ ! -s "$tls/ca.crt" ] || [ ! -s "$tls/ca.key" ]; then
    (umask 077 && openssl genrsa -out "$tls/ca.key" 3072 2>/dev/null)
    openssl req -x509 -new -key "$tls/ca.key" -sha256 -days "$((days + 365))" \
        -subj "/CN=ride-status deployment CA $(date -u +%Y-%m-%d)" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -out "$tls/ca.crt"
    rm -f "$tls/broker.crt" "$tls/worker.crt"  # signed by an earlier CA: issue them again
    say "created a private CA: $tls/ca.crt"
fi

names=""
for host in "${hostnames[@]}"; do names+="DNS:$host,"; done
issue broker "/CN=broker" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=${names}IP:127.0.0.1"
issue worker "/CN=worker" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
chmod 644 "$tls/ca.crt" "$tls/broker.crt" "$tls/worker.crt"

python3 scripts/broker-security.py --accounts config/security/accounts.yaml --out "$out"
accounts_file=${accounts_file:-$out/dynamic-security.json}
mkdir -p "$(dirname "$accounts_file")"
python3 scripts/broker-accounts.py init --file "$accounts_file" --accounts config/security/accounts.yaml \
    --static-secrets "$out/secrets" --secrets "$out/accounts"

if [ -n "$broker_uid" ]; then
    chown "$broker_uid" "$out/passwords" "$out/acl" "$tls/broker.key"
    # The plugin writes its file anew (a .new file, then a rename): the folder is the broker's too.
    chown "$broker_uid" "$accounts_file" "$(dirname "$accounts_file")"
fi
if [ -n "$client_uid" ]; then
    chown -R "$client_uid" "$out/secrets"
    chown "$client_uid" "$tls/worker.key"
    chmod 755 "$out/secrets"
fi
say "ready in $out (CA valid until $(openssl x509 -enddate -noout -in "$tls/ca.crt" | cut -d= -f2))"
