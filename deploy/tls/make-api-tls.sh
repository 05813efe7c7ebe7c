#!/bin/bash
# make-api-tls.sh DIR [NAME] [DAYS]: makes, with openssl, what the agents'
# API TLS needs, by hand (with cert-manager, see cert-manager.yaml here):
#
#   DIR/ca.crt, DIR/ca.key   a CA of the cluster's own, valid 10 years
#   DIR/tls.crt, DIR/tls.key one certificate for NAME (default mysqlha-agent,
#                            what the agents' --api-tls-server-name checks),
#                            for server and client auth, valid DAYS (365)
#
# Then, in the cluster's namespace, before `kubectl apply -k deploy/`:
#
#   kubectl create secret generic mysqlha-api-tls \
#     --from-file=DIR/tls.crt --from-file=DIR/tls.key --from-file=DIR/ca.crt
#
# Every member presents the same certificate: the agents reach each other at
# pod IPs, which no certificate made in advance can name, and verify the
# name instead. Keep ca.key out of the cluster (it signs certificates the
# agents trust): offline, for the renewal. To renew before DAYS run out:
# `make-api-tls.sh DIR` again with the same DIR keeps the CA (renews
# tls.crt only), and replacing the Secret is enough: the agents present the
# new certificate from their next connection, without a restart.
#
# It never overwrites a CA, and exits non-zero with the reason on bad input.
# Tested by deploy/tls_test.go.
set -euo pipefail

if (($# < 1 || $# > 3)); then
	echo "usage: make-api-tls.sh DIR [NAME] [DAYS]" >&2
	exit 2
fi
dir=$1
name=${2:-mysqlha-agent}
days=${3:-365}
if [[ ! $name =~ ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ ]]; then
	echo "make-api-tls: NAME \"$name\" must be a DNS name (lower-case letters, digits, '-' and '.')" >&2
	exit 2
fi
if [[ ! $days =~ ^[1-9][0-9]*$ ]]; then
	echo "make-api-tls: DAYS \"$days\" must be a positive whole number" >&2
	exit 2
fi
if ! command -v openssl >/dev/null; then
	echo "make-api-tls: openssl not found (Debian: apt-get install openssl)" >&2
	exit 1
fi
umask 077
mkdir -p "$dir"
cd "$dir"

if [[ -e ca.crt || -e ca.key ]]; then
	if [[ ! -e ca.crt || ! -e ca.key ]]; then
		echo "make-api-tls: $dir has only one of ca.crt and ca.key; remove it, or give another DIR" >&2
		exit 1
	fi
	echo "make-api-tls: keeping the CA in $dir; renewing tls.crt and tls.key" >&2
else
	openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
		-keyout ca.key -out ca.crt -days 3650 -subj "/CN=mysqlha API CA" \
		-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
fi
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	-keyout tls.key.new -out tls.csr -subj "/CN=$name" 2>/dev/null
printf 'subjectAltName=DNS:%s\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=critical,digitalSignature\nbasicConstraints=CA:FALSE\n' "$name" >tls.ext
openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days "$days" \
	-extfile tls.ext -out tls.crt.new 2>/dev/null
# The pair is replaced together, last: never a new certificate with an old key.
mv tls.key.new tls.key
mv tls.crt.new tls.crt
rm -f tls.csr tls.ext ca.srl
echo "make-api-tls: wrote $dir/ca.crt, ca.key, tls.crt and tls.key for $name, valid $days days" >&2
