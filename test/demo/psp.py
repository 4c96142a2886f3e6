#!/usr/bin/env python3
# test/demo/psp.py: a stand-in for the payment service provider (PSP) that
# pays refunds out, for the idempotency run of test/demo.sh.
#
#   psp.py PORT_FILE TIMELINE      (started by test/demo.sh, not by hand)
#
# Listens on a free port of 127.0.0.1 (written to PORT_FILE once it
# listens) and, like a real PSP, honours idempotency keys:
#
#   POST /refunds    header Idempotency-Key, body: the amount in cents
#                    -> 201 "re_N new"       a new refund, money sent
#                    -> 200 "re_N replayed"  the key was seen: the refund it
#                                            made then, nothing sent again
#                    -> 422 when the key was used for another amount
#   GET /count       -> 200 "N"  how many refunds it has made (money sent)
#
# Every request is put on the run's timeline (the same format as
# demo_event in test/demo/lib.sh).  Python's standard library only; one
# request at a time, so "seen?" and "record" cannot interleave.

import os
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

port_file, timeline = sys.argv[1], sys.argv[2]
refunds = {}        # idempotency key -> (refund id, amount in cents)


def event(what):
    with open(timeline, "a") as f:
        f.write("%d\tpsp\t%s\n" % (time.time_ns() // 1000, what))


def cents(c):
    return "%d.%02d" % (c // 100, c % 100)


class PSP(BaseHTTPRequestHandler):
    def reply(self, status, body):
        data = (body + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/count":
            self.reply(200, str(len(refunds)))
        else:
            self.reply(404, "no such thing")

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        key = self.headers.get("Idempotency-Key")
        if self.path != "/refunds":
            return self.reply(404, "no such thing")
        try:
            amount = int(body.decode().strip())
        except ValueError:
            return self.reply(400, "the body is the amount in cents")
        if not key:
            return self.reply(400, "Idempotency-Key required")
        if key in refunds:
            rid, was = refunds[key]
            if was != amount:
                event("POST /refunds key %s, %s -> 422: the key was used for %s"
                      % (key, cents(amount), cents(was)))
                return self.reply(422, "key reused for another request")
            event("POST /refunds key %s -> key seen: %s again, nothing sent"
                  % (key, rid))
            return self.reply(200, rid + " replayed")
        rid = "re_%d" % (len(refunds) + 1)
        refunds[key] = (rid, amount)
        event("POST /refunds key %s -> %s: %s sent to the customer"
              % (key, rid, cents(amount)))
        self.reply(201, rid + " new")

    def log_message(self, *args):
        pass


server = HTTPServer(("127.0.0.1", int(os.environ.get("DEMO_PSP_PORT_WANTED", "0"))), PSP)
with open(port_file + ".tmp", "w") as f:
    f.write("%d\n" % server.server_address[1])
# renamed into place: whoever sees the file sees the whole port
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
