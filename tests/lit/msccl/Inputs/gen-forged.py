"""Writes a 2-gpu MSCCL allreduce whose gpu 0 output holds its own input
chunk 1 + 2^64 times plus gpu 1's: doubling a scratch copy 64 times, then
adding it in. A checker whose operand count or sums wrap at 64 bits (or a
32-bit count) would take it for the right answer."""
import sys

def step(s, kind, sb, so, db, do):
    return ('      <step s="%d" type="%s" srcbuf="%s" srcoff="%d" dstbuf="%s" dstoff="%d" cnt="1" '
            'depid="-1" deps="-1" hasdep="0"/>' % (s, kind, sb, so, db, do))

steps = [("s", "i", 0, "i", 0), ("rrc", "i", 0, "o", 0), ("cpy", "i", 0, "s", 0)]
for _ in range(64):
    steps += [("cpy", "s", 0, "s", 1), ("re", "s", 1, "s", 0)]
steps.append(("re", "s", 0, "o", 0))
out = ['<algo name="forged" proto="Simple" nchannels="1" nchunksperloop="1" ngpus="2" '
       'coll="allreduce" inplace="0" outofplace="1">']
out.append('  <gpu id="0" i_chunks="1" o_chunks="1" s_chunks="2">')
out.append('    <tb id="0" send="1" recv="1" chan="0">')
out += [step(i, *st) for i, st in enumerate(steps)]
out.append('    </tb>\n  </gpu>')
out.append('  <gpu id="1" i_chunks="1" o_chunks="1" s_chunks="2">')
out.append('    <tb id="0" send="0" recv="0" chan="0">')
out += [step(0, "s", "i", 0, "i", 0), step(1, "rrc", "i", 0, "o", 0)]
out.append('    </tb>\n  </gpu>\n</algo>')
sys.stdout.write("\n".join(out) + "\n")
