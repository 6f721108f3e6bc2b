# Writes an in-place ring allreduce of N gpus (and K channels) as MSCCL-IR XML,
# as msccl-tools writes them: gen-ring.py N [K] > ring.xml
import sys
n = int(sys.argv[1]); inst = int(sys.argv[2]) if len(sys.argv) > 2 else 1
out = []
out.append('<algo name="ring_%d" proto="Simple" nchannels="%d" nchunksperloop="%d" ngpus="%d" coll="allreduce" inplace="1" outofplace="0" minBytes="0" maxBytes="0">' % (n, inst, n*inst, n))
for r in range(n):
    out.append('  <gpu id="%d" i_chunks="%d" o_chunks="0" s_chunks="0">' % (r, n*inst))
    for c in range(inst):
        out.append('    <tb id="%d" send="%d" recv="%d" chan="%d">' % (c, (r+1)%n, (r-1)%n, c))
        steps = []
        def st(t, off):
            o = off*inst + c
            steps.append((t, o))
        st("s", r)
        for k in range(1, n-1): st("rrs", (r-k)%n)
        st("rrcs", (r+1)%n)
        for k in range(2, n): st("rcs", (r+2-k)%n)
        # last receive
        st("r", (r+2)%n) if n > 2 else None
        for i,(t,o) in enumerate(steps):
            out.append('      <step s="%d" type="%s" srcbuf="i" srcoff="%d" dstbuf="i" dstoff="%d" cnt="1" depid="-1" deps="-1" hasdep="0"/>' % (i, t, o, o))
        out.append('    </tb>')
    out.append('  </gpu>')
out.append('</algo>')
print("\n".join(out))
