"""Read character vectors out of an R package's lazy-load data base (`data/Rdata.rdx` + `Rdata.rdb`), no R needed.

The index (`.rdx`) is a gzip'd R serialization of `list(variables=, references=, compressed=)`, where each
variable maps to an (offset, length) pair into the `.rdb` file; each blob there is a 4-byte big-endian length
followed by a zlib stream of the object's own XDR serialization. Only the object types a data package of text
uses are decoded (vectors, lists, pairlists, symbols, attributes); anything else is an error naming the type.
See "R Internals", section 1.8 (serialization formats).
"""

import gzip
import struct
import zlib
from pathlib import Path

NILSXP, SYMSXP, LISTSXP, CHARSXP, LGLSXP, INTSXP, REALSXP, STRSXP, VECSXP = 0, 1, 2, 9, 10, 13, 14, 16, 19
REFSXP, NILVALUE_SXP, GLOBALENV_SXP, EMPTYENV_SXP, BASEENV_SXP = 255, 254, 253, 242, 252
NA_INTEGER = -(2**31)


class _XdrReader:
    def __init__(self, payload: bytes, source: str):
        self.buffer, self.position, self.source, self.references = payload, 0, source, []

    def take(self, count: int) -> bytes:
        chunk = self.buffer[self.position : self.position + count]
        if len(chunk) != count:
            raise ValueError(f"{self.source}: R serialization ends early at byte {self.position}")
        self.position += count
        return chunk

    def integer(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def header(self) -> None:
        if self.take(2) != b"X\n":
            raise ValueError(f"{self.source}: not an R XDR serialization (expected 'X\\n')")
        version = self.integer()
        self.integer(), self.integer()  # writer's and minimal reader's R versions
        if version == 3:
            self.take(self.integer())  # native encoding name
        elif version != 2:
            raise ValueError(f"{self.source}: R serialization version {version} is not supported (2 or 3)")

    def item(self):
        flags = self.integer()
        kind, has_attributes, has_tag = flags & 0xFF, bool(flags & 512), bool(flags & 1024)
        if kind in (NILVALUE_SXP, GLOBALENV_SXP, EMPTYENV_SXP, BASEENV_SXP):
            return None
        if kind == REFSXP:
            index = flags >> 8 or self.integer()
            return self.references[index - 1]
        if kind == SYMSXP:
            symbol = self.item()
            self.references.append(symbol)
            return symbol
        if kind == LISTSXP:
            return self._pairlist(has_attributes, has_tag)
        if kind == CHARSXP:
            length = self.integer()
            return None if length == -1 else self.take(length).decode("utf-8", errors="replace")
        if kind in (LGLSXP, INTSXP):
            count = self.integer()
            value = [None if v == NA_INTEGER else v for v in struct.unpack(f">{count}i", self.take(4 * count))]
        elif kind == REALSXP:
            count = self.integer()
            value = list(struct.unpack(f">{count}d", self.take(8 * count)))
        elif kind in (STRSXP, VECSXP):
            value = [self.item() for _ in range(self.integer())]
        else:
            raise ValueError(f"{self.source}: R object type {kind} is not supported by this reader")
        attributes = self.item() if has_attributes else {}
        return _with_names(value, attributes)

    def _pairlist(self, has_attributes: bool, has_tag: bool) -> dict:
        """A pairlist as a dict tag -> value (attribute lists and argument lists are pairlists)."""
        entries = {}
        while True:
            if has_attributes:
                self.item()
            tag = self.item() if has_tag else len(entries)
            entries[tag] = self.item()
            flags = self.integer()
            if flags & 0xFF != LISTSXP:
                self.position -= 4
                self.item()  # the list terminator
                return entries
            has_attributes, has_tag = bool(flags & 512), bool(flags & 1024)


def _with_names(value: list, attributes: dict):
    names = attributes.get("names")
    return dict(zip(names, value)) if names and len(names) == len(value) else value


def read_lazyload_db(data_dir: str | Path) -> dict:
    """All variables of `data_dir/Rdata.rdx|rdb` as Python values (character vectors become lists of str)."""
    data_dir = Path(data_dir)
    index_reader = _XdrReader(gzip.decompress((data_dir / "Rdata.rdx").read_bytes()), str(data_dir / "Rdata.rdx"))
    index_reader.header()
    index = index_reader.item()
    blobs = (data_dir / "Rdata.rdb").read_bytes()
    variables = {}
    for name, (offset, length) in index["variables"].items():
        offset, length = int(offset), int(length)
        payload = zlib.decompress(blobs[offset + 4 : offset + length])
        reader = _XdrReader(payload, f"{data_dir / 'Rdata.rdb'}:{name}")
        reader.header()
        variables[name] = reader.item()
    return variables
