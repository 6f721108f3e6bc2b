"""Writes a copy of a plan file without its contract section (flag bit 1
cleared, the section cut, body size and checksum fixed): a user-declared
collective's plan as a generator that writes no contract would make it.

    strip-contract.py IN OUT
"""
import struct
import sys

data = bytearray(open(sys.argv[1], "rb").read())
assert data[:8] == b"COLLPLAN"
flags = data[34]
assert flags & 2, "the plan has no contract section"
name_len = struct.unpack_from("<I", data, 60)[0]
table = 64 + name_len
count = struct.unpack_from("<I", data, table)[0]
last_off, last_size = struct.unpack_from("<QQ", data, table + 4 + 16 * (count - 1))
end = last_off + last_size  # The contract section follows the last rank's.
del data[end:]
data[34] = flags & ~2
struct.pack_into("<Q", data, 16, len(data) - 32)
h = 0xcbf29ce484222325
for b in data[32:]:
    h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
struct.pack_into("<Q", data, 24, h)
open(sys.argv[2], "wb").write(data)
