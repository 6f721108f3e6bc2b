# Adds K threadblocks to every gpu of an MSCCL-IR file, numbered after its
# own, each copying a scratch chunk of its own onto itself (K scratch chunks
# per gpu): pad-threadblocks.py FILE K > padded.xml
import re
import sys

text = open(sys.argv[1]).read()
k = int(sys.argv[2])
out, at = [], 0
for gpu in re.finditer(r'<gpu id="\d+"[^>]*>', text):
    end = text.index("</gpu>", gpu.end())
    ntb = len(re.findall(r"<tb ", text[gpu.end():end]))
    out.append(text[at:gpu.start()])
    out.append(re.sub(r's_chunks="\d+"', 's_chunks="%d"' % k, gpu.group(0)))
    out.append(text[gpu.end():end])
    for i in range(k):
        out.append('    <tb id="%d" send="-1" recv="-1" chan="0">\n'
                   '      <step s="0" type="cpy" srcbuf="s" srcoff="%d" dstbuf="s" dstoff="%d" '
                   'cnt="1" depid="-1" deps="-1" hasdep="0"/>\n'
                   '    </tb>\n' % (ntb + i, i, i))
    at = end
out.append(text[at:])
sys.stdout.write("".join(out))
