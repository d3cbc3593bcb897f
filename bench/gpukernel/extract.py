import re, sys
s = open(sys.argv[1]).read()
m = re.search(r'const kernelSource = `(.*?)`', s, re.S)
open(sys.argv[2], 'w').write(m.group(1))
