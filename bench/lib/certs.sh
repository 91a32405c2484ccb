# The haproxy pairs' certificates (bench/proxy-pair.sh, bench/http-pair.sh).
# Sourced, not run.

# make_certs DIR: a P-256 bench CA and two certificates it signs, a.pem
# (client, a.bench.local) and b.pem (server, b.bench.local), each with its
# key appended, as haproxy's `crt` wants; ca.pem verifies both.
make_certs() {
    local d="$1"
    mkdir -p "$d"
    (
        cd "$d"
        openssl ecparam -name prime256v1 -genkey -noout -out ca.key
        openssl req -x509 -new -key ca.key -sha256 -days 2 -subj "/CN=bench CA" -out ca.pem
        for side in a b; do
            openssl ecparam -name prime256v1 -genkey -noout -out "$side.key"
            openssl req -new -key "$side.key" -subj "/CN=$side.bench.local" -out "$side.csr"
            local ext="subjectAltName=DNS:$side.bench.local"
            [[ $side == a ]] && ext+=$'\nextendedKeyUsage=clientAuth' || ext+=$'\nextendedKeyUsage=serverAuth'
            openssl x509 -req -in "$side.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -sha256 \
                -extfile <(printf '%s\n' "$ext") -out "$side.crt" 2>/dev/null
            cat "$side.crt" "$side.key" >"$side.pem"
        done
    )
}
