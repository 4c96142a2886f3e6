#!/usr/bin/python3
"""ZooKeeper chores of the locksvc suite (kazoo):

    zk_tool.py bump HOSTS N             N transactions (create + delete a node),
                                        to raise the zxid counter
    zk_tool.py wait-gone HOSTS PATH S   wait (a watch, no polling) until PATH
                                        is gone; false after S seconds
    zk_tool.py zxid HOSTS               print the last zxid (a node's czxid)
"""
import sys
import threading

from kazoo.client import KazooClient


def main():
    cmd, hosts = sys.argv[1], sys.argv[2]
    zk = KazooClient(hosts=hosts, timeout=5.0)
    zk.start(timeout=60)
    try:
        if cmd == "bump":
            for _ in range(int(sys.argv[3])):
                path = zk.create("/locksvc-bump/n-", b"", sequence=True, makepath=True)
                zk.delete(path)
        elif cmd == "wait-gone":
            path, secs = sys.argv[3], float(sys.argv[4])
            gone = threading.Event()

            def watch(event):
                # re-arm: the node may be recreated between events
                if zk.exists(path, watch=watch) is None:
                    gone.set()

            if zk.exists(path, watch=watch) is None:
                gone.set()
            if not gone.wait(secs):
                sys.exit(1)
        elif cmd == "zxid":
            path = zk.create("/locksvc-zxid/n-", b"", sequence=True, makepath=True)
            print(zk.exists(path).czxid)
            zk.delete(path)
    finally:
        zk.stop()
        zk.close()


if __name__ == "__main__":
    main()
