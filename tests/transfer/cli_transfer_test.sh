#!/usr/bin/env bash
# cli_transfer_test.sh SPLITZIP_BINARY REPO_DIR — `splitzip serve` and `splitzip send` end to end on loopback:
# a bit-exact transfer in both modes (also with --direct-io), a refused token with "splitzip: error:" and a non-zero exit on both sides,
# no overwrite without --force, hostile bytes on the port then 8 concurrent senders, a peer beyond --max-sessions
# refused as busy, and option errors.
set -u
BIN=$1
REPO=$2
DATA=$REPO/data/kv_code_bf16_slice.bin
WORK=$(mktemp -d)
SERVER_PID=
cleanup() {
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

# start_server ARGS...: serve --once in the background, wait for its port file
start_server() {
  rm -f "$WORK/port"
  "$BIN" serve --listen 127.0.0.1:0 --once --port-file "$WORK/port" --timeout 10 "$@" >"$WORK/serve.out" 2>"$WORK/serve.err" &
  SERVER_PID=$!
  for _ in $(seq 200); do [ -s "$WORK/port" ] && break; sleep 0.05; done
  [ -s "$WORK/port" ] || fail "server did not start: $(cat "$WORK/serve.err")"
  PORT=$(cat "$WORK/port")
}
wait_server() {
  wait "$SERVER_PID"
  SERVER_RC=$?
  SERVER_PID=
}

export UCX_TLS=${UCX_TLS:-tcp}
cp "$DATA" "$WORK/a.bin"
head -c 100002 "$DATA" >"$WORK/b.bin"
for mode in "" "--raw" "--adaptive"; do
  rm -rf "$WORK/out" && mkdir "$WORK/out"
  start_server --out "$WORK/out"
  "$BIN" send "$WORK/a.bin" "$WORK/b.bin" --to "127.0.0.1:$PORT" $mode --chunk-values 50000 --window 3 --threads 2 \
    >"$WORK/send.out" 2>"$WORK/send.err" || fail "send $mode: $(cat "$WORK/send.err")"
  wait_server
  [ "$SERVER_RC" -eq 0 ] || fail "serve $mode exited $SERVER_RC: $(cat "$WORK/serve.err")"
  cmp "$WORK/a.bin" "$WORK/out/a.bin" || fail "a.bin differs ($mode)"
  cmp "$WORK/b.bin" "$WORK/out/b.bin" || fail "b.bin differs ($mode)"
  grep -q "sent 2 tensors" "$WORK/send.out" || fail "no summary: $(cat "$WORK/send.out")"
  if [ "$mode" = "--adaptive" ]; then
    grep -q "(adaptive, [0-9]* of [0-9]* messages raw" "$WORK/send.out" || fail "no adaptive summary: $(cat "$WORK/send.out")"
  fi
  echo "ok: bit-exact transfer ${mode:-compressed}"
done

# --direct-io writes the same bytes (chunks of 128 KiB: whole blocks, the tensors' last chunks short)
for mode in "" "--raw"; do
  rm -rf "$WORK/out" && mkdir "$WORK/out"
  start_server --out "$WORK/out" --direct-io
  "$BIN" send "$WORK/a.bin" "$WORK/b.bin" --to "127.0.0.1:$PORT" $mode --chunk-values 65536 --threads 2 \
    >"$WORK/send.out" 2>"$WORK/send.err" || fail "send $mode to --direct-io: $(cat "$WORK/send.err")"
  wait_server
  [ "$SERVER_RC" -eq 0 ] || fail "serve --direct-io $mode exited $SERVER_RC: $(cat "$WORK/serve.err")"
  cmp "$WORK/a.bin" "$WORK/out/a.bin" || fail "a.bin differs (--direct-io $mode)"
  cmp "$WORK/b.bin" "$WORK/out/b.bin" || fail "b.bin differs (--direct-io $mode)"
  [ "$(ls -A "$WORK/out" | wc -l)" -eq 2 ] || fail "files left besides the tensors: $(ls -A "$WORK/out")"
  echo "ok: bit-exact transfer to --direct-io ${mode:-compressed}"
done

# token: the receiver wants one, the sender has another
rm -rf "$WORK/out" && mkdir "$WORK/out"
start_server --out "$WORK/out" --token right
SPLITZIP_TOKEN=wrong "$BIN" send "$WORK/a.bin" --to "127.0.0.1:$PORT" >"$WORK/send.out" 2>"$WORK/send.err"
rc=$?
wait_server
[ "$rc" -ne 0 ] || fail "send with a wrong token succeeded"
[ "$SERVER_RC" -ne 0 ] || fail "serve --once accepted a wrong token"
grep -q "^splitzip: error: .*token" "$WORK/send.err" || fail "sender message: $(cat "$WORK/send.err")"
[ -z "$(ls -A "$WORK/out")" ] || fail "files written for a refused peer"
echo "ok: wrong token refused"

# an existing file is not replaced without --force
rm -rf "$WORK/out" && mkdir "$WORK/out" && echo "keep me" >"$WORK/out/a.bin"
start_server --out "$WORK/out"
"$BIN" send "$WORK/a.bin" --to "127.0.0.1:$PORT" >"$WORK/send.out" 2>"$WORK/send.err"
rc=$?
wait_server
[ "$rc" -ne 0 ] || fail "send over an existing file succeeded"
[ "$(cat "$WORK/out/a.bin")" = "keep me" ] || fail "serve replaced an existing file without --force"
start_server --out "$WORK/out" --force
"$BIN" send "$WORK/a.bin" --to "127.0.0.1:$PORT" >"$WORK/send.out" 2>"$WORK/send.err" || fail "send with --force: $(cat "$WORK/send.err")"
wait_server
cmp "$WORK/a.bin" "$WORK/out/a.bin" || fail "serve --force did not write the tensor"
echo "ok: no overwrite without --force"

# several senders at once against a long-running server, with hostile bytes on its port first
rm -rf "$WORK/out" && mkdir "$WORK/out"
rm -f "$WORK/port"
"$BIN" serve --listen 127.0.0.1:0 --port-file "$WORK/port" --max-sessions 8 --handshake-timeout 1 --out "$WORK/out" \
  >"$WORK/serve.out" 2>"$WORK/serve.err" &
SERVER_PID=$!
for _ in $(seq 200); do [ -s "$WORK/port" ] && break; sleep 0.05; done
PORT=$(cat "$WORK/port")
printf '\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff' >"/dev/tcp/127.0.0.1/$PORT" || fail "cannot connect"
head -c 65536 /dev/zero >"/dev/tcp/127.0.0.1/$PORT" 2>/dev/null
head -c 5000 /dev/urandom >"/dev/tcp/127.0.0.1/$PORT" 2>/dev/null
pids=()
for i in 1 2 3 4 5 6 7 8; do
  cp "$WORK/b.bin" "$WORK/c$i.bin"
  "$BIN" send "$WORK/c$i.bin" --to "127.0.0.1:$PORT" >"$WORK/send$i.out" 2>"$WORK/send$i.err" &
  pids+=($!)
done
for i in 1 2 3 4 5 6 7 8; do
  wait "${pids[$((i - 1))]}" || fail "concurrent send $i: $(cat "$WORK/send$i.err")"
  cmp "$WORK/b.bin" "$WORK/out/c$i.bin" || fail "c$i.bin differs"
done
kill -0 "$SERVER_PID" 2>/dev/null || fail "serve died: $(cat "$WORK/serve.err")"
grep -q "refused a peer" "$WORK/serve.err" || fail "no refusal logged for the hostile bytes: $(cat "$WORK/serve.err")"
[ "$(grep -c '^session:' "$WORK/serve.out")" -eq 8 ] || fail "serve did not report 8 sessions: $(cat "$WORK/serve.out")"
kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null; SERVER_PID=
echo "ok: hostile bytes survived, 8 concurrent senders"

# beyond --max-sessions a peer is refused with a message, not left waiting
rm -rf "$WORK/out" && mkdir "$WORK/out"
rm -f "$WORK/port"
"$BIN" serve --listen 127.0.0.1:0 --port-file "$WORK/port" --max-sessions 1 --timeout 3 --discard \
  >"$WORK/serve.out" 2>"$WORK/serve.err" &
SERVER_PID=$!
for _ in $(seq 200); do [ -s "$WORK/port" ] && break; sleep 0.05; done
PORT=$(cat "$WORK/port")
"$BIN" send "$WORK/a.bin" --to "127.0.0.1:$PORT" --rate 0.0005 --chunk-values 4096 --window 1 >/dev/null 2>&1 &
HOLDER=$!
sleep 0.5
"$BIN" send "$WORK/b.bin" --to "127.0.0.1:$PORT" >"$WORK/send.out" 2>"$WORK/send.err" && fail "a second session got in"
grep -q "^splitzip: error: .*busy" "$WORK/send.err" || fail "busy message: $(cat "$WORK/send.err")"
kill "$HOLDER" 2>/dev/null; wait "$HOLDER" 2>/dev/null
kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null; SERVER_PID=
echo "ok: beyond --max-sessions refused as busy"

# option errors
"$BIN" serve --out "$WORK/out" --discard >/dev/null 2>"$WORK/err" && fail "serve with --out and --discard"
grep -q "^splitzip: error:" "$WORK/err" || fail "serve option message: $(cat "$WORK/err")"
"$BIN" send "$WORK/a.bin" --to nowhere-without-port >/dev/null 2>"$WORK/err" && fail "send without a port"
grep -q "^splitzip: error:" "$WORK/err" || fail "send option message: $(cat "$WORK/err")"
"$BIN" send "$WORK/b.bin" --to 127.0.0.1:1 --dtype fp32 >/dev/null 2>"$WORK/err" && fail "odd-sized fp32 file accepted"
grep -q "^splitzip: error:" "$WORK/err" || fail "dtype size message: $(cat "$WORK/err")"
echo "ok: option errors"
echo "7 passed, 0 failed"
