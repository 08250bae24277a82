#!/usr/bin/env python3
"""The largest relative difference between the parameters of two model.safetensors files of the
same architecture: max over tensors and entries of |b − a|, divided by max |a| (standard library
only; F32 and F64 tensors).

usage: safetensors_diff.py A.safetensors B.safetensors   → prints e.g. 9.1e-04
"""
import json
import struct
import sys


def tensors(path):
    with open(path, 'rb') as f:
        size = struct.unpack('<Q', f.read(8))[0]
        header = json.loads(f.read(size))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == '__metadata__':
            continue
        fmt = {'F32': 'f', 'F64': 'd'}.get(info['dtype'])
        if fmt is None:
            continue
        begin, end = info['data_offsets']
        out[name] = struct.unpack(f'<{(end - begin) // struct.calcsize(fmt)}{fmt}', data[begin:end])
    return out


def main():
    a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
    if a.keys() != b.keys():
        sys.exit(f'safetensors_diff.py: different tensors: {sorted(a)} vs {sorted(b)}')
    scale = max(abs(x) for t in a.values() for x in t)
    diff = max(abs(x - y) for k in a for x, y in zip(a[k], b[k]))
    print(f'{diff / scale:.1e}')


if __name__ == '__main__':
    main()
