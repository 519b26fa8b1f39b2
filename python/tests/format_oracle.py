"""An independent, slow, numpy-only encoder of docs/FORMAT.md §2–§4 frames, written from the spec alone, to check
the library's frames byte for byte. XXH3 checksums need the `xxhash` package; without it the checksum bytes are
left as zero and reported in a mask so that tests compare every other byte."""

import numpy as np

try:
    import xxhash
except ImportError:
    xxhash = None

# dtype id -> (W, E, M)
TRAITS = {1: (16, 8, 7), 2: (16, 5, 10), 3: (32, 8, 23), 4: (8, 4, 3), 5: (8, 5, 2)}
IDS = {"bf16": 1, "fp16": 2, "fp32": 3, "fp8_e4m3": 4, "fp8_e5m2": 5}


def h32(data: bytes):
    if xxhash is None:
        return None
    return xxhash.xxh3_64_intdigest(data) & 0xFFFFFFFF


M64 = (1 << 64) - 1


def _sm(i: int) -> int:
    z = ((i + 1) * 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def _av(h: int) -> int:
    h ^= h >> 37
    h = (h * 0x165667919E3779F9) & M64
    return h ^ (h >> 32)


def lh32(data: bytes) -> int:
    """LH32 of docs/FORMAT.md §4.6.1, word by word as the text states it."""
    n = len(data)
    padded = data + bytes(-(-n // 16) * 16 - n)
    words = [int.from_bytes(padded[8 * q: 8 * q + 8], "little") for q in range(len(padded) // 8)]
    a = [_sm(64 + j) for j in range(64)]
    for q, w in enumerate(words):
        j, t, r = q % 64, (q % 256) // 64, q // 256
        u = (r * 0x9E3779B1) & 0xFFFFFFFF
        x = w ^ _sm(j) ^ _sm(128 + t) ^ (u | (u << 32))
        a[j] = (a[j] + (x & 0xFFFFFFFF) * (x >> 32) + words[q ^ 1]) & M64
    s = 0
    for lane in range(32):
        b = a[2 * lane + 1]
        s = (s + _av(a[2 * lane] ^ (((b << 32) | (b >> 32)) & M64))) & M64
    return _av(s ^ ((n * 0x9E3779B185EBCA87) & M64)) & 0xFFFFFFFF


def split(bits: np.ndarray, did: int):
    w, e, m = TRAITS[did]
    x = bits.astype(np.uint64)
    exp = (x >> np.uint64(m)) & np.uint64((1 << e) - 1)
    sign = (x >> np.uint64(w - 1)) & np.uint64(1)
    rest = (sign << np.uint64(m)) | (x & np.uint64((1 << m) - 1))
    return exp, rest


def pack(fields: np.ndarray, b: int) -> bytes:
    """§3: groups of 8 fields in b bytes, field j at bits [j*b, (j+1)*b) of the little-endian group; padding 0.
    Groups are back to back, so this is one LSB-first bit stream."""
    n = fields.size
    padded = np.zeros(-(-n // 8) * 8, dtype=np.uint64)
    padded[:n] = fields
    bitplanes = (padded[:, None] >> np.arange(b, dtype=np.uint64)[None, :]) & np.uint64(1)
    return np.packbits(bitplanes.astype(np.uint8).reshape(-1), bitorder="little").tobytes()


def encode(bits: np.ndarray, did: int, code_bits: int, codebook, chunk_log2: int = 12, checksums="lh32"):
    """Returns (frame bytes, mask) where mask[i] is False for checksum bytes this oracle could not compute.
    checksums: "lh32" (flag LANE_HASH, the library's default), "h32" or False."""
    assert checksums in ("lh32", "h32", False)
    lane = checksums == "lh32"
    w, e, m = TRAITS[did]
    r = w - e
    bits = np.asarray(bits).reshape(-1)
    n = bits.size
    s = 1 << chunk_log2
    c = -(-n // s)
    exp, rest = split(bits, did)
    lut = {int(v): i for i, v in enumerate(codebook)}
    index, sums, records = [], [], []
    end = 0
    raw_bytes = bits.astype(f"<u{w // 8}").tobytes()
    for ci in range(c):
        lo, hi = ci * s, min((ci + 1) * s, n)
        ln = hi - lo
        e_c = exp[lo:hi]
        codes = np.array([lut.get(int(v), 0) for v in e_c], dtype=np.uint64)
        esc = [j for j, v in enumerate(e_c) if int(v) not in lut]
        g = -(-ln // 8) * code_bits
        raw_size = -(-ln // 8) * e
        if g + 3 * len(esc) <= raw_size:
            rec = pack(codes, code_bits)
            rec += b"".join(int(j).to_bytes(2, "little") for j in esc)
            rec += bytes(int(e_c[j]) for j in esc)
            mode = 0
        else:
            rec = pack(e_c, e)
            mode = 1
        end += len(rec)
        records.append(rec)
        index.append((end | (mode << 62)).to_bytes(8, "little"))
        chunk = raw_bytes[lo * w // 8: hi * w // 8]
        sums.append(lh32(chunk) if lane else h32(chunk))
    exp_section = b"".join(records)
    header = bytearray(64)
    header[0:4] = (0x465A5053).to_bytes(4, "little")
    header[4] = 1
    header[5] = did
    header[6] = code_bits
    header[7] = chunk_log2
    header[8:12] = ((9 if lane else 1) if checksums else 0).to_bytes(4, "little")
    header[12] = len(codebook)
    header[16:24] = n.to_bytes(8, "little")
    header[24:32] = len(exp_section).to_bytes(8, "little")
    for i, v in enumerate(codebook):
        header[32 + i] = int(v)
    hc = h32(bytes(header[:60]))
    mask = []
    header[60:64] = (hc or 0).to_bytes(4, "little")
    mask += [True] * 60 + [hc is not None] * 4
    frame = bytes(header) + b"".join(index)
    mask += [True] * (8 * c)
    if checksums:
        for v in sums:
            frame += (v or 0).to_bytes(4, "little")
            mask += [v is not None] * 4
    body = pack(rest, r) + exp_section
    frame += body
    mask += [True] * len(body)
    return frame, np.array(mask, dtype=bool)
