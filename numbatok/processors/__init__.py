"""Post-processors, reduced to one shape: a template of special tokens around the sequence(s), plus
the ByteLevel offset trimming. ByteLevel, RobertaProcessing, BertProcessing and TemplateProcessing
(and a Sequence of them) all map onto it, so output assembly is one vectorized routine.

A template item is ("special", ids tuple, type_id) or ("seq", 0 | 1, type_id).
"""
from dataclasses import dataclass, field

from ..errors import UnsupportedComponentError


@dataclass
class PostProcessor:
    single: list = field(default_factory=lambda: [("seq", 0, 0)])
    pair: list = field(default_factory=lambda: [("seq", 0, 0), ("seq", 1, 1)])
    trim_offsets: bool = False
    add_prefix_space: bool = False
    force_type_ids_zero: bool = False   # RobertaProcessing sets every type id to 0
    kinds: tuple = ()

    def special_tokens(self, single=True):
        items = self.single if single else self.pair
        return [it for it in items if it[0] == "special"]


def _special(tokens_map, name, path):
    spec = tokens_map.get(name)
    if spec is None:
        raise UnsupportedComponentError(f"{path}: special token {name!r} is used by the template but not defined in special_tokens")
    return tuple(int(i) for i in spec["ids"])


def _template(items, tokens_map, path):
    out = []
    for j, it in enumerate(items):
        if "SpecialToken" in it:
            st = it["SpecialToken"]
            out.append(("special", _special(tokens_map, st["id"], f"{path}[{j}]"), int(st.get("type_id", 0))))
        elif "Sequence" in it:
            sq = it["Sequence"]
            out.append(("seq", 0 if sq["id"] == "A" else 1, int(sq.get("type_id", 0))))
        else:
            raise UnsupportedComponentError(f"{path}[{j}]: template item {it!r} is neither SpecialToken nor Sequence")
    return out


def _parse_one(d, path, pp):
    t = d.get("type")
    if t == "ByteLevel":
        pp.trim_offsets = bool(d.get("trim_offsets", True))
        pp.add_prefix_space = bool(d.get("add_prefix_space", True))
    elif t == "RobertaProcessing":
        cls_tok, cls_id = d["cls"]
        sep_tok, sep_id = d["sep"]
        pp.single = [("special", (int(cls_id),), 0), ("seq", 0, 0), ("special", (int(sep_id),), 0)]
        pp.pair = pp.single + [("special", (int(sep_id),), 0), ("seq", 1, 0), ("special", (int(sep_id),), 0)]
        pp.trim_offsets = bool(d.get("trim_offsets", True))
        pp.add_prefix_space = bool(d.get("add_prefix_space", True))
        pp.force_type_ids_zero = True
    elif t == "BertProcessing":
        cls_tok, cls_id = d["cls"]
        sep_tok, sep_id = d["sep"]
        pp.single = [("special", (int(cls_id),), 0), ("seq", 0, 0), ("special", (int(sep_id),), 0)]
        pp.pair = pp.single + [("seq", 1, 1), ("special", (int(sep_id),), 1)]
    elif t == "TemplateProcessing":
        tokens_map = d.get("special_tokens", {})
        pp.single = _template(d.get("single", []), tokens_map, f"{path}.single")
        pp.pair = _template(d.get("pair", []), tokens_map, f"{path}.pair")
    else:
        raise UnsupportedComponentError(
            f"{path}: type {t!r} is not supported yet (supported post_processor types: "
            "ByteLevel, RobertaProcessing, BertProcessing, TemplateProcessing, Sequence)")
    pp.kinds = pp.kinds + (t,)


def parse(d, path="post_processor"):
    pp = PostProcessor()
    if d is None:
        return pp
    if d.get("type") == "Sequence":
        for j, sub in enumerate(d.get("processors", [])):
            _parse_one(sub, f"{path}.processors[{j}]", pp)
    else:
        _parse_one(d, path, pp)
    return pp
