#!/usr/bin/env python3
"""An h2c echo server with its defences removed, to prove h2_attacks.py can fail.

Not a server to test: it exists so that each attack's "not defended" verdict
is seen at least once. Built on python-hyper's h2 with its limits lifted:

  default           a thread per connection; writes block, so a peer that
                    never reads makes it stop reading (the floods then count
                    as defended: "server stopped reading").
  --buffer-output   writes go to an unbounded queue, so it never stops reading:
                    ping-flood and settings-flood are not defended.
  --one-at-a-time   one connection at a time: zero-window is not defended.

rapid-reset, continuation-flood (no CONTINUATION limit) and hpack-bomb (no
header list limit) are not defended in every mode. POST bodies are echoed.

    python3 undefended_server.py --port 18090 [--buffer-output] [--one-at-a-time]
"""

from __future__ import annotations

import argparse
import queue
import socket
import threading

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.frame_buffer
import h2.settings

# Lift h2's CONTINUATION limit: header blocks may now grow without end.
h2.frame_buffer.CONTINUATION_BACKLOG = 1 << 40


def serve(sock: socket.socket, buffer_output: bool) -> None:
    config = h2.config.H2Configuration(client_side=False, header_encoding=None)
    conn = h2.connection.H2Connection(config=config)
    conn.local_settings = h2.settings.Settings(client=False, initial_values={
        h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 1000})
    conn.initiate_connection()
    conn.decoder.max_header_list_size = 1 << 40  # Lift the header list limit.
    outgoing: queue.Queue[bytes] = queue.Queue()

    def write(data: bytes) -> bool:
        if buffer_output:
            outgoing.put(data)
            return True
        try:
            sock.sendall(data)
            return True
        except OSError:
            return False

    def writer() -> None:
        while True:
            try:
                sock.sendall(outgoing.get())
            except OSError:
                return

    if buffer_output:
        threading.Thread(target=writer, daemon=True).start()
    write(conn.data_to_send())
    bodies: dict[int, bytes] = {}
    pending: dict[int, bytes] = {}
    while True:
        try:
            data = sock.recv(65536)
        except OSError:
            break
        if not data:
            break
        try:
            events = conn.receive_data(data)
        except h2.exceptions.ProtocolError:
            write(conn.data_to_send())
            break
        conn.decoder.max_header_list_size = 1 << 40
        for event in events:
            if isinstance(event, h2.events.RequestReceived):
                bodies[event.stream_id] = b""
            elif isinstance(event, h2.events.DataReceived):
                bodies[event.stream_id] = bodies.get(event.stream_id, b"") + event.data
                conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                body = bodies.pop(event.stream_id, b"")
                conn.send_headers(event.stream_id, [(":status", "200"), ("content-length", str(len(body)))],
                                  end_stream=not body)
                if body:
                    pending[event.stream_id] = body
            elif isinstance(event, h2.events.StreamReset):
                bodies.pop(event.stream_id, None)
                pending.pop(event.stream_id, None)
        for stream_id in list(pending):
            body = pending[stream_id]
            try:
                size = min(len(body), conn.local_flow_control_window(stream_id), conn.max_outbound_frame_size)
                if size > 0:
                    conn.send_data(stream_id, body[:size], end_stream=size == len(body))
                    body = body[size:]
            except h2.exceptions.ProtocolError:
                body = b""
            if body:
                pending[stream_id] = body
            else:
                del pending[stream_id]
        out = conn.data_to_send()
        if out and not write(out):
            break
    sock.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--buffer-output", action="store_true")
    parser.add_argument("--one-at-a-time", action="store_true")
    args = parser.parse_args()
    listener = socket.create_server((args.host, args.port), reuse_port=False)
    while True:
        sock, _ = listener.accept()
        if args.one_at_a_time:
            serve(sock, args.buffer_output)
        else:
            threading.Thread(target=serve, args=(sock, args.buffer_output), daemon=True).start()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
