#!/usr/bin/env python3
"""HTTP/2 frames as Python's h2 project writes and reads them, for SwitchyardHTTP2's tests.

    h2_peer.py encode   JSON frame descriptions on stdin -> the frames' octets (hyperframe) on stdout
    h2_peer.py decode   octets on stdin -> JSON frame descriptions (hyperframe) on stdout
    h2_peer.py request  nothing on stdin -> what an h2 client connection sends for one GET
                        (preface, SETTINGS, HEADERS) on stdout
    h2_peer.py response a server's octets on stdin -> the events an h2 client connection that
                        sent that GET sees, as JSON, on stdout

A frame description is an object with "type" (the frame type's name, or "UNKNOWN" with a
numeric "code"), "stream" and the fields of its type; octets are written as hex strings.
"""
import json
import sys

import h2.config
import h2.connection
import h2.events
from hyperframe.frame import (
    ContinuationFrame, DataFrame, ExtensionFrame, Frame, GoAwayFrame, HeadersFrame, PingFrame,
    PriorityFrame, PushPromiseFrame, RstStreamFrame, SettingsFrame, WindowUpdateFrame,
)

REQUEST_HEADERS = [(":method", "GET"), (":scheme", "http"), (":authority", "example.test"), (":path", "/index")]


def flags(description, names):
    return [name for name, key in names if description.get(key)]


def build(d):
    """One hyperframe frame from its description."""
    kind, stream = d["type"], d.get("stream", 0)
    pad = d.get("pad", 0)
    padded = [("PADDED", "pad")] if pad else []
    if kind == "DATA":
        return DataFrame(stream, data=bytes.fromhex(d["data"]), pad_length=pad,
                         flags=flags(d, [("END_STREAM", "end_stream")] + padded))
    if kind == "HEADERS":
        priority = d.get("priority")
        frame = HeadersFrame(stream, data=bytes.fromhex(d["block"]), pad_length=pad,
                             flags=flags(d, [("END_STREAM", "end_stream"), ("END_HEADERS", "end_headers")] + padded)
                             + (["PRIORITY"] if priority else []))
        if priority:
            frame.depends_on, frame.stream_weight = priority["depends_on"], priority["weight"]
            frame.exclusive = priority["exclusive"]
        return frame
    if kind == "PRIORITY":
        return PriorityFrame(stream, depends_on=d["depends_on"], stream_weight=d["weight"], exclusive=d["exclusive"])
    if kind == "RST_STREAM":
        return RstStreamFrame(stream, error_code=d["code"])
    if kind == "SETTINGS":
        if d.get("ack"):
            return SettingsFrame(0, flags=["ACK"])
        return SettingsFrame(0, settings={identifier: value for identifier, value in d["settings"]})
    if kind == "PUSH_PROMISE":
        return PushPromiseFrame(stream, promised_stream_id=d["promised"], data=bytes.fromhex(d["block"]),
                                pad_length=pad, flags=flags(d, [("END_HEADERS", "end_headers")] + padded))
    if kind == "PING":
        return PingFrame(0, opaque_data=bytes.fromhex(d["data"]), flags=flags(d, [("ACK", "ack")]))
    if kind == "GOAWAY":
        return GoAwayFrame(0, last_stream_id=d["last_stream"], error_code=d["code"],
                           additional_data=bytes.fromhex(d["debug"]))
    if kind == "WINDOW_UPDATE":
        return WindowUpdateFrame(stream, window_increment=d["increment"])
    if kind == "CONTINUATION":
        return ContinuationFrame(stream, data=bytes.fromhex(d["block"]),
                                 flags=flags(d, [("END_HEADERS", "end_headers")]))
    if kind == "UNKNOWN":
        frame = ExtensionFrame(d["code"], stream, flag_byte=d.get("flags", 0), body=bytes.fromhex(d["data"]))
        # ExtensionFrame.serialize writes the length that parsing sets, not the body's.
        frame.body_len = len(frame.body)
        return frame
    raise ValueError(f"unknown frame description {d}")


def describe(frame):
    """A frame's description, in the form `build` takes (padding and priority left out)."""
    f = frame.flags
    if isinstance(frame, DataFrame):
        return {"type": "DATA", "stream": frame.stream_id, "data": frame.data.hex(), "end_stream": "END_STREAM" in f}
    if isinstance(frame, HeadersFrame):
        return {"type": "HEADERS", "stream": frame.stream_id, "block": frame.data.hex(),
                "end_stream": "END_STREAM" in f, "end_headers": "END_HEADERS" in f}
    if isinstance(frame, PriorityFrame):
        return {"type": "PRIORITY", "stream": frame.stream_id, "depends_on": frame.depends_on,
                "weight": frame.stream_weight, "exclusive": frame.exclusive}
    if isinstance(frame, RstStreamFrame):
        return {"type": "RST_STREAM", "stream": frame.stream_id, "code": frame.error_code}
    if isinstance(frame, SettingsFrame):
        if "ACK" in f:
            return {"type": "SETTINGS", "stream": frame.stream_id, "ack": True}
        return {"type": "SETTINGS", "stream": frame.stream_id, "settings": [[k, v] for k, v in frame.settings.items()]}
    if isinstance(frame, PushPromiseFrame):
        return {"type": "PUSH_PROMISE", "stream": frame.stream_id, "promised": frame.promised_stream_id,
                "block": frame.data.hex(), "end_headers": "END_HEADERS" in f}
    if isinstance(frame, PingFrame):
        return {"type": "PING", "stream": frame.stream_id, "data": frame.opaque_data.hex(), "ack": "ACK" in f}
    if isinstance(frame, GoAwayFrame):
        return {"type": "GOAWAY", "stream": frame.stream_id, "last_stream": frame.last_stream_id,
                "code": frame.error_code, "debug": frame.additional_data.hex()}
    if isinstance(frame, WindowUpdateFrame):
        return {"type": "WINDOW_UPDATE", "stream": frame.stream_id, "increment": frame.window_increment}
    if isinstance(frame, ContinuationFrame):
        return {"type": "CONTINUATION", "stream": frame.stream_id, "block": frame.data.hex(),
                "end_headers": "END_HEADERS" in f}
    if isinstance(frame, ExtensionFrame):
        return {"type": "UNKNOWN", "code": frame.type, "stream": frame.stream_id, "data": frame.body.hex()}
    raise ValueError(f"unexpected frame {frame!r}")


def decode(octets):
    frames, view = [], memoryview(octets)
    while view:
        frame, length = Frame.parse_frame_header(view[:9])
        if len(view) < 9 + length:
            raise ValueError(f"{len(view) - 9} octets left for a frame of {length}")
        frame.parse_body(view[9:9 + length])
        frames.append(describe(frame))
        view = view[9 + length:]
    return frames


def client():
    connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    connection.initiate_connection()
    connection.send_headers(1, REQUEST_HEADERS, end_stream=True)
    return connection


def event(e):
    if isinstance(e, h2.events.ResponseReceived):
        return {"event": "response", "stream": e.stream_id, "headers": [[k, v] for k, v in e.headers]}
    if isinstance(e, h2.events.DataReceived):
        return {"event": "data", "stream": e.stream_id, "data": e.data.hex()}
    if isinstance(e, h2.events.StreamEnded):
        return {"event": "end", "stream": e.stream_id}
    if isinstance(e, h2.events.RemoteSettingsChanged):
        return {"event": "settings", "settings": sorted([int(k), v.new_value] for k, v in e.changed_settings.items())}
    if isinstance(e, h2.events.SettingsAcknowledged):
        return {"event": "settings_ack"}
    if isinstance(e, h2.events.PingReceived):
        return {"event": "ping", "data": e.ping_data.hex()}
    if isinstance(e, h2.events.ConnectionTerminated):
        return {"event": "goaway", "code": int(e.error_code), "last_stream": e.last_stream_id,
                "debug": (e.additional_data or b"").hex()}
    return {"event": type(e).__name__}


def main():
    mode = sys.argv[1]
    if mode == "encode":
        sys.stdout.buffer.write(b"".join(build(d).serialize() for d in json.load(sys.stdin)))
    elif mode == "decode":
        json.dump(decode(sys.stdin.buffer.read()), sys.stdout)
    elif mode == "request":
        sys.stdout.buffer.write(client().data_to_send())
    elif mode == "response":
        connection = client()
        connection.data_to_send()
        json.dump([event(e) for e in connection.receive_data(sys.stdin.buffer.read())], sys.stdout)
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
