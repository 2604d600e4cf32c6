"""Prints where, under the install prefix given as argv[1], this interpreter looks for packages:
the first site-packages or dist-packages directory of sys.path below <prefix>/lib*, relative to
the prefix. Prints nothing when there is none (a prefix the interpreter does not search).

Meson's own choice is wrong for Debian's python3 under /usr/local: Debian's meson installs into
<prefix>/lib/python3/dist-packages, which the interpreter searches only for prefix /usr, while
/usr/local is searched as /usr/local/lib/python3.X/dist-packages.
"""

import os
import sys

prefix = os.path.realpath(sys.argv[1])
for entry in sys.path:
    if not os.path.isabs(entry) or os.path.basename(entry) not in ("site-packages",
                                                                    "dist-packages"):
        continue
    relative = os.path.relpath(os.path.realpath(entry), prefix)
    if relative.split(os.sep)[0].startswith("lib"):
        print(relative)
        break
