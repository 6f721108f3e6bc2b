# Adds K threadblocks without steps to every gpu of an MSCCL-IR file,
# numbered after its own: pad-threadblocks.py FILE K > padded.xml
import re
import sys

text = open(sys.argv[1]).read()
k = int(sys.argv[2])
out, at = [], 0
for gpu in re.finditer(r'<gpu id="\d+"[^>]*>', text):
    end = text.index("</gpu>", gpu.end())
    ntb = len(re.findall(r"<tb ", text[gpu.end():end]))
    out.append(text[at:end])
    out.extend('    <tb id="%d" send="-1" recv="-1" chan="0">\n    </tb>\n' % (ntb + i)
               for i in range(k))
    at = end
out.append(text[at:])
sys.stdout.write("".join(out))
