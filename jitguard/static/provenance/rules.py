"""The inference rules of the value analysis, as data: the one registry that the classifier, the
confidence of findings, docs/provenance.md (generated from it) and the tests read.

Each rule is one step that decides or carries a value's class (VARYING, BUCKETED, STABLE, always a
multiple of 16): an id that evidence chains cite (``Prov.rules``, ``ArgFacts.rules``, a finding's
``details["rules"]``), a one-line reason, its kind of evidence, and its limits (each number with why).

* **structural** evidence follows from the code: ``.item()``, a reduction of a tensor's contents, a
  loop counter, arithmetic on a varying value, the layout of a tensor allocated from a varying size,
  what the callers pass;
* **conventional** evidence rests on a convention the code does not prove: the leading dim of a tensor
  of unknown origin is its token dim, ``self.*`` is fixed for the model, a name that says tokens.

A finding's confidence follows from the rules its chain cites (``confidence``): high when every step
is structural, medium when one is conventional, low when the class rests on a name alone.

    python -m jitguard.static.provenance docs/provenance.md   # rewrite the generated table
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Literal

Evidence = Literal["structural", "conventional"]
STRUCTURAL: Evidence = "structural"
CONVENTIONAL: Evidence = "conventional"


@dataclass(frozen=True)
class Limit:
    value: int
    why: str


@dataclass(frozen=True)
class InferenceRule:
    id: str
    gives: str  # what it concludes: VARYING / BUCKETED / STABLE / div16 / float / carries / binds / skips
    evidence: Evidence
    reason: str  # one line
    # a finding citing it is never above "low": the class rests on a name alone, or on a step too weak
    # to carry a finding by itself
    name_only: bool = False
    limits: dict[str, Limit] = field(default_factory=dict)
    # a finding citing it is never above "low" though the step is structural: what it gives is a few
    # variants per process, which warm-up covers, not a value that varies per call
    few_variants: bool = False
    # the few values are what a guard before the launch leaves (messages say "bounded by a guard")
    guard_bound: bool = False
    # the values it leaves are of one value class: one compile as a plain int (JG001 does not report the
    # value), like a bucket for a tl.constexpr (JG002 reports it as per call)
    one_class: bool = False
    # a finding citing it is never above "low" though the step is structural: the value varies only on
    # some of the code's paths, and the code does not show that those are the ones taken in normal use
    varies_off_fast_path: bool = False
    # it reads how the code uses a value that only a name classed before (`num_reqs`): what callers or
    # returns in other modules show by structure still settles the value, a name from there does not
    in_place_of_name: bool = False

    @property
    def never_above_low(self) -> bool:
        """A finding whose chain cites this rule is reported at the low level at most."""
        return self.name_only or self.few_variants or self.varies_off_fast_path


def _rule(id: str, gives: str, evidence: Evidence, reason: str, name_only: bool = False, few_variants: bool = False,
          guard_bound: bool = False, one_class: bool = False, varies_off_fast_path: bool = False,
          in_place_of_name: bool = False, **limits: tuple[int, str]) -> InferenceRule:
    return InferenceRule(id, gives, evidence, reason, name_only, {k: Limit(*v) for k, v in limits.items()},
                         few_variants, guard_bound, one_class, varies_off_fast_path, in_place_of_name)


_ALL = (
    # ---- values written in the code
    _rule("literal", "STABLE", STRUCTURAL, "an int, float, bool or None literal is one value; an int literal that is a "
          "non-zero multiple of 16 is div16"),
    _rule("module-constant", "STABLE", STRUCTURAL, "a module-level name bound to a value that does not vary is fixed "
          "for the process"),
    _rule("imported-name", "STABLE", CONVENTIONAL, "a name imported from another module is taken for a constant (its "
          "value is not followed)"),
    _rule("import-time", "STABLE", STRUCTURAL, "a module-level name bound at import and neither declared `global` in "
          "a function nor mutated in place by one (`X.append`, `X[k] = v`; a local of the same name is another object) is "
          "fixed for the process whatever its right-hand side computes (`.item()`, a reduction, a call): module code "
          "runs once"),
    _rule("fixed-loop", "STABLE", STRUCTURAL, "a loop over a set of values written in the code (a literal tuple, a "
          "module constant not filled or mutated after its literal, `range()` of ints the code fixes, zip/enumerate of "
          "those) takes few, fixed values",
          depth=(4, "a constant built from constants more than 4 levels deep was not seen in the codebases measured"),
          range=(16, "`range(k)` with k fixed in the code is a literal tuple of k values; past 16 (the bound "
                 "`range-guard` takes for few) it is a few variants per process, not a handful (`held-collection-loop`)")),
    _rule("comprehension-aggregate", "carries", STRUCTURAL, "`sum(f(x) for x in xs)`, `max(...)`, `min(...)` over a "
          "comprehension of one loop takes the class of its item expression, as the loop written out would (`x` read as "
          "an item of `xs`); a sum also counts the items (`len(xs)`); over a collection written in the code "
          "(`fixed-loop`) it is fixed"),
    _rule("retry-candidates", "few variants", STRUCTURAL, "the variable of a loop that stops at the first candidate "
          "that works (the attempt in a `try` with handlers that reads the loop variable; `break`/`return` once it "
          "goes through) takes the candidates up to the first that fits, the same ones each call: a few variants "
          "per process, each compiled at most once, reported at the low level; not when the candidates themselves "
          "vary per call", few_variants=True),
    _rule("held-collection-loop", "few variants", CONVENTIONAL, "a loop over a collection the object or module holds "
          "(`self.x`, an imported module's attribute, a module-level name bound at import and never rebound nor "
          "mutated, an attribute of another object that this module fills with fixed values only, "
          "`Meta(ratios=self.ratios)`; `.items()`/`zip`/`enumerate` of those) or over `range()` of bounds fixed that "
          "way takes the same few values each call, as fixed as the object (the `self-attribute` convention): a few "
          "variants per process, reported at the low level; not an attribute this module never fills or fills with "
          "a per-call value, not an object that is itself a per-call loop variable, not a bound that is a tensor dim "
          "or rests on a name alone (a dim guessed fixed walks a per-step axis as often as a model axis: vLLM "
          "0.33.0's spec-decode draft steps)", few_variants=True),
    # ---- values computed per call
    _rule("device-data", "VARYING", STRUCTURAL, "`.item()` / `.tolist()` read a value off the device: it changes with "
          "the data; so does `int(t[-1])` of a tensor `t` (a name the function reads as one, `t.shape`, `t.tolist()`, "
          "or makes with torch: not a list of settings such as a block size)"),
    _rule("unpacked-comprehension", "carries", STRUCTURAL, "`a, b = (s // v for s in t)` with `t` a tuple or "
          "list written in the same function: element i is the expression with `s` = `t[i]` (one `for`, no `if`, "
          "no starred items; anything else stays unknown)"),
    _rule("host-random", "VARYING", STRUCTURAL, "a draw of the host random-number generator (`random.getrandbits(31)`, "
          "`np.random.randint(...)` with `random`/`secrets`/NumPy's `random` imported) is a new value each call: a "
          "seed handed to a kernel"),
    _rule("reduction", "VARYING", STRUCTURAL, "a reduction of a tensor's or array's contents (`lengths.max()`, "
          "`np.sum(a)`) follows the data"),
    _rule("reduction-of-fixed", "STABLE", CONVENTIONAL, "a reduction of a weight-like tensor, a module constant or a "
          "`self` attribute is fixed for the model"),
    _rule("loop-counter", "VARYING", STRUCTURAL, "a loop variable over a per-call range or collection takes a new value "
          "each iteration"),
    _rule("single-element-return", "carries", STRUCTURAL, "a loop over a call of a function of the module (`for a, b "
          "in f(...)`, or over a local bound once to such a call; not a generator) every return of which is a list or tuple literal of "
          "one element (`return [(0, n)]`) runs once: each variable is that element's component, classified with "
          "the helper's parameters bound to the call's arguments, not a loop counter; a return of another helper of "
          "the module is read through its own returns"),
    _rule("single-pass-return", "VARYING, never above low / STABLE", STRUCTURAL, "the same loop over a helper only "
          "some of whose returns are one-element literals (a fast path: `return [(0, n)]` before a comprehension "
          "over `range(0, n, step)`): where the variable is fixed on every one-element return and varies only on "
          "the others it varies, but only when the helper takes its slower path; the code does not show how often "
          "that is, and a fast path that returns early is written for the common case (the two such findings read "
          "by hand in liger-kernel 0.8.5 were both false: the loop runs once with 0 in normal use), so a finding "
          "resting on it is never above low; fixed on every path, it is fixed. One-element returns whose component "
          "varies leave the loop counter",
          varies_off_fast_path=True,
          depth=(2, "helpers followed: the one the loop calls and one it returns; the one fast-path helper in "
                 "the six codebases measured (2026-12-01, liger-kernel 0.8.5) returns its literals directly"),
          returns=(8, "a helper with more than 8 returns is a dispatcher more than a fast path; the one read in "
                   "the six codebases measured has 3, and helpers without a one-element return are not read")),
    _rule("arithmetic", "carries", STRUCTURAL, "`+ - * // %`, `cdiv`, `round_up`, `min`, `max`, `int()`, `math.*` of "
          "a varying value vary; the int-ness of a rounded true division (`math.ceil(a / b)`, `int(a / b)`) is kept"),
    _rule("budget-split", "carries", STRUCTURAL, "a budget written in the code shared out over a count "
          "(`512 // n`) is no longer that count: a name cannot excuse it"),
    _rule("count-ratio", "VARYING, never above low", CONVENTIONAL, "a quotient of two per-call counts that each rest "
          "on a convention (`num_tokens // num_seqs`, `x.shape[0] // batch_size`: the leading-dim guess, a name) "
          "divides the batch back out: what is left is often a configured ratio (tokens per request in uniform "
          "decode, draft tokens, top-k), so the quotient is no evidence that the value changes per call; not when "
          "the two share a source (`n // min(n, C)`, rows per program; `x2.shape[0] // x.shape[0]` with `x2` a view "
          "of `x`: the parameters, fields and tensors each is computed from, through the function's locals), and a "
          "count read off the device on either side (`.item()`) keeps its level", name_only=True),
    _rule("pow2-floor", "div16", STRUCTURAL, "`max(p, 16)` (or any power of two of at least 16) with `p` always a "
          "power of two by its code (`next_power_of_2(..)`, `1 << k`, a local every assignment of which is one, "
          "the parameter's own value never reaching it) is a power of two of at least 16: a multiple of 16, and so "
          "are its products (`n_blocks * block_h`): one value class"),
    _rule("bucket", "BUCKETED", STRUCTURAL, "`next_power_of_2(v)`, `1 << v.bit_length()`, `2 ** k` of a varying value "
          "takes a few values"),
    _rule("appended-list", "carries", STRUCTURAL, "an element of a list built by appending is any of the values put in"),
    _rule("returns", "carries", STRUCTURAL, "a call of a function of this module has the class of what it returns "
          "(element i, for a tuple unpacked)",
          depth=(30, "bounds the recursion through helpers that call each other; no chain in the codebases "
                 "measured was deeper than 12")),
    _rule("returns-per-call", "carries", STRUCTURAL, "a call of a function of this module that binds each of its "
          "parameters has the class the function's return takes with those parameters bound to the classes of this "
          "call's arguments (substitution), not the most varying of what all its callers pass; where the call can't be "
          "bound (`*args`, `**kw`) or the return reads a free or global name, `returns` over the callers decides",
          nesting=(6, "helpers bound inside helpers: the six codebases measured (2026-12-01) nest at most 4 "
                   "(liger-kernel); each level classifies the helper's body afresh, so the bound keeps that cost small")),
    _rule("returns-elsewhere", "carries", STRUCTURAL, "a call of a function imported from another module of the "
          "scanned tree has the class its return takes there with its parameters bound to this call's arguments: the "
          "module that defines it records the class with the parameters unknown and each parameter the return varies "
          "with; a parameter bound to a varying argument makes the call vary (bucketed where either side buckets), one "
          "bound to an entry parameter hands the question on to that parameter's callers elsewhere; a value classed "
          "varying by its name alone (`n_tok` unpacked from the call, handed on through this module's callers) that "
          "rests on such a call takes the structural class instead where one of the function's return paths varies "
          "per call by structure (`.item()` of a per-batch tensor): the most varying path decides, as for any "
          "join, since one path that varies per call is enough for a recompile",
          arguments=(16, "a call with more arguments is a constructor or a configuration builder, not a size helper; "
                     "the six codebases measured (2026-12-01) call the helpers a launch rests on with at most 6"),
          nesting=(4, "calls nested in a call's arguments (`f(g(h(n)))`), each bound in turn; the summary itself is "
                   "one module hop: the defining module follows its own helpers (same-module returns), not a third "
                   "module's functions (each hop would re-read files); the codebases measured nest at most 2"),
          reexports=(8, "re-exports followed to the defining module (`pkg.f` where pkg/__init__.py imports f), as "
                     "for kernels")),
    _rule("assignment", "carries", STRUCTURAL, "a local has the class of the values assigned to it, the most varying "
          "of them",
          depth=(60, "guards against pathological expressions; chains in the codebases measured stay under 25"),
          branches=(4, "a tensor assigned in more than 4 places is taken as unknown: its layout is no longer one "
                    "thing to follow")),
    _rule("last-reassignment", "carries", STRUCTURAL, "`x = f(x)` as a statement of the function's own body (not "
          "under an `if`, a loop or a `try`), after every other assignment of `x` and before every read of it outside "
          "its own right-hand side (and those of the other reassignments from itself, and `x is None` tests), is "
          "the value every read sees: its class alone, not the most varying of all the assignments (`M = a + b` "
          "then `M = round_up(M, 16)`: one value class)"),
    # ---- tensor dims and strides
    _rule("leading-dim", "VARYING", CONVENTIONAL, "the leading dim of a tensor of unknown origin is taken for its "
          "token or batch dim (a guess)"),
    _rule("sequence-dim", "VARYING", CONVENTIONAL, "in a 4-d unpacking `B, T, H, D = q.shape` the second dim, named "
          "like a per-call size, is the sequence dim of a batch-first layout: position and name agree (a guess, like "
          "the leading one); not where the same unpacking names the leading dim a sequence length "
          "(`max_seqlen, batch_size, h, d = q.shape`: sequence-first, the second dim is then taken by its name alone); "
          "in a head-first `B, H, T, D = q.shape` (the leading target named a batch, the second heads) the third dim is "
          "the sequence dim"),
    _rule("element-count", "VARYING", CONVENTIONAL, "`x.numel()` of a tensor of unknown origin and rank counts its "
          "tokens too (a guess); read by hand on the six codebases measured (2026-12-01) the guess was right 13 times "
          "in 20: persistent tables and [tokens, 16-aligned dim] activations are as common as per-call counts, so a "
          "finding resting on it is never above low (where the code shows the rank: `shown-rank`)", name_only=True),
    _rule("index-count", "VARYING", CONVENTIONAL, "`x.numel()` of a tensor (or of what it views) that the same "
          "launch, or another launch in the same function, passes to a kernel parameter whose loaded values the "
          "kernel (or a jit helper of its file it hands the pointer to) uses as integers (an offset of another "
          "address, a loop bound, a comparison with a program id or an offset; not a bitcast): an index or metadata tensor (slots, lengths, request indices), one entry per token or request "
          "times a small width, not tokens times a 16-aligned model dim, so its count is a per-call count like the "
          "leading-dim guess (a convention still: the tensor could be a persistent table); loads only feeding "
          "arithmetic, stored values or `tl.dot` leave it `element-count`"),
    _rule("rows-of-count", "VARYING", CONVENTIONAL, "`x.numel() // d`, `d` a size fixed for the model and not a "
          "literal (`x.shape[-1]`, `hidden`), divides the model dims back out of an element count: the rows left are "
          "the leading-dim guess, not the element-count one"),
    _rule("boundary-count", "VARYING", CONVENTIONAL, "`x.numel() - 1` counts the intervals between the elements "
          "of a vector of boundaries (`cu_seqlens`, `query_start_loc`): x is 1-d, so the count rests on the "
          "leading-dim guess, not the element-count one (not where the code shows 2 or more dims)"),
    _rule("batch-first-3d", "VARYING", CONVENTIONAL, "in a 3-d unpacking `B, T, C = x.shape` whose leading target is "
          "named a batch (`B`, `bs`, `batch`, `batch_size`; not tokens, not a configured `max_*`), the second dim, its "
          "name not a model dim's (`H`, `Hq`, `n_heads`), is the sequence dim of a batch-first layout (`[B, L, C]` activations): the "
          "leading name says where the count sits, so the next place is the sequence, not heads (a guess, like the "
          "leading one); a leading dim named tokens is a tokens-first `[T, H, D]` layout whose second dim is a model dim"),
    _rule("stride-over-varying", "carries", STRUCTURAL, "a stride of a tensor of unknown layout is the product of the "
          "dims after it (`existing-stride`); where the same function shows one of those dims varies (the sequence dim "
          "of a batch-first unpacking, `sequence-dim` / `batch-first-3d`; a resized spatial dim, `resized-dim`), "
          "`x.stride(i)` varies with it and rests on the rules that dim does; times trailing model dims it is "
          "`count-times-dim`"),
    _rule("collection-length", "VARYING", CONVENTIONAL, "`len(x)` of a collection nothing is known of is a per-call "
          "count (a guess)"),
    _rule("conflicting-layout", "VARYING, never above low", CONVENTIONAL, "a leading dim (`n = w.shape[0]`) that the "
          "function also uses as the innermost size of a tensor of 2 or more dims it allocates or views, after an outer "
          "size that is a per-call count (`torch.empty(m, n)` with `m` varying, `y.view(*x.shape[:-1], n)`; not "
          "transposed after; `(3, n)`, `(num_groups, n)` are stacked or column-major layouts of a count), itself or in a function of its module it passes `n` "
          "to: the leading-dim and model-dim conventions disagree, so the guess is no evidence; in a product with a "
          "varying count it may be the model dim (`count-times-dim`)", name_only=True,
          depth=(2, "a size handed down more than 2 helpers before its allocation was not seen in the codebases "
                 "measured")),
    _rule("stacked-leading", "VARYING, never above low", CONVENTIONAL, "a leading dim (`x.shape[0]`) of a tensor "
          "whose shape the same function unpacks leaving the leading place out and naming a later one like a per-call "
          "count (`_, n_tokens, d = x.shape`): a stack of layers or blocks over the tokens, so the leading-dim guess "
          "and the code's own reading disagree and the guess is no evidence", name_only=True),
    _rule("constant-tensor", "STABLE", STRUCTURAL, "a tensor built from constants (`torch.arange(<literals>)`, "
          "`torch.tensor([1, 2])`), and whatever is selected from it or views it, has sizes fixed in the code; so does a "
          "module-level name bound once to one and never rebound nor mutated (a check the module runs at import "
          "passing `a = torch.tensor([1, 2])`; under `if __name__ == \"__main__\":` it is script code, `test-callers`)"),
    _rule("model-dim", "STABLE", CONVENTIONAL, "a non-leading dim of a tensor of unknown origin is a model dimension"),
    _rule("resized-dim", "VARYING", CONVENTIONAL, "a non-leading dim of a tensor of unknown origin that the function "
          "resizes like another non-leading dim of the same tensor (scaled by the same factor: `h * s`, `w * s`, "
          "`2 * h`, `2 * w`; or both padded: `h + 2 * ph`, `w + 2 * pw`, `t + front`), not rounded after (`(n + b - "
          "1) // b`), the term not itself a dim nor a literal pad (`h - 1`), is a spatial dim of a feature map or "
          "image, whose size is the request's, not the model's: rows and channels are not resized in pairs. A "
          "weight-like tensor's dims stay fixed (a padded weight `N + pad_n`, `K + pad_k`). Never above low: read by "
          "hand in random samples it was right on 4 of 13 findings (encoders fed fixed-size tiles, `w + 2` pads that "
          "stay in one value class: what sizes reach the map is configuration the code does not show)",
          name_only=True),
    _rule("existing-stride", "STABLE", CONVENTIONAL, "a stride of a tensor of unknown layout is a product of trailing "
          "model dims"),
    _rule("shown-rank", "carries", STRUCTURAL, "`x.numel()` of a tensor whose layout is not known but whose rank "
          "the code shows is the product of its dims: the tensors every caller in the module passes, element i or "
          "the value a helper of the module returns, a leading-dim slice of one (its leading dim the slice's length), "
          "copies and transposes of one, a helper of the module that reads a non-leading dim of it; `view(-1)`, "
          "`reshape(-1)`, `flatten()` keep the factors of the tensor they flatten. A leading dim nothing here tells "
          "of is the leading-dim guess; a 1-d tensor's count, or one times literal trailing dims, stays a count; "
          "2 or more dims with a trailing one not a literal is `count-times-dim`"),
    _rule("row-size", "STABLE", STRUCTURAL, "`x[0].numel()`, `x.numel() // x.shape[0]` are the size of one "
          "row: the non-leading dims"),
    _rule("tensor-metadata", "STABLE", STRUCTURAL, "`ndim`, `dtype`, `element_size()`, device properties do not vary "
          "with the data"),
    _rule("allocated-layout", "carries", STRUCTURAL, "dims and strides of a tensor allocated in the code "
          "(`empty/zeros/full/new_*`, `*_like`, views, transposes, `as_strided`) follow from the sizes it was made "
          "of; stride i is the product of the dims after i; a -1 between kept dims (`v.reshape(n, -1, d)`) whose kept "
          "varying dim is only the leading-dim guess absorbs middle dims nothing tells of (unknown)",
          depth=(80, "views of views rarely go past 10; the bound only stops cycles the memo misses")),
    _rule("shape-product", "carries", STRUCTURAL, "a loop over a tensor's dims (`for s in x.shape[1:]: n *= s`) takes "
          "dims, not counter values: non-leading ones are model dims, the whole shape includes the leading dim"),
    _rule("param-reassigned", "carries", STRUCTURAL, "a parameter reassigned only from itself (`if c: x = "
          "x.contiguous()`, `x = x.t()`) starts from what the callers pass: weight-like if they pass weight-like "
          "tensors and every reassignment keeps it so (`x = x[:n]` does not); reassigned only under a condition, "
          "it is also the parameter itself for what it is handed to (callers elsewhere may fix its dims)"),
    _rule("read-before-assign", "carries", STRUCTURAL, "a read of a parameter that the body assigns later (each "
          "assignment after it in the code, none in a loop around it; `a, x = f(x)`: the read is in its own "
          "right-hand side) sees what the callers pass: the parameter's class, and the parameter itself for what "
          "it is handed to (callers elsewhere may fix its dims)"),
    _rule("recursive-caller", "skips", STRUCTURAL, "a function calling itself (`f(x.t(), ...)` inside `f`) hands on "
          "what it was given: that call is no evidence of what its parameter holds, the other callers decide"),
    _rule("conditional-tensor", "carries", STRUCTURAL, "`a.view(...) if c else a` is either tensor: weight-like if "
          "both are, each dim the most varying of the two when both layouts are known (a `None` branch is no tensor)"),
    _rule("state-object", "STABLE", CONVENTIONAL, "`p.shape` of a parameter off which the function also reads a "
          "tensor (`p.scale.stride(0)`, `p.absmax.numel()`): `p` is an object holding tensors (a quantization state, "
          "a layer), not a tensor, and the shape it records is that of what it holds for the model's life"),
    _rule("weight-like", "STABLE", CONVENTIONAL, "a tensor named like a weight, bias, cache or per-expert table (or "
          "`self.*`, or a buffer an object holds: `state.kv_buffer`, `obj.workspace`, allocated once at its "
          "capacity) keeps its shape for the model's life"),
    # ---- where a value comes from
    _rule("self-attribute", "STABLE", CONVENTIONAL, "`self.x`, `cls.x`, `config.x` are fixed for the model"),
    _rule("module-attribute", "STABLE", CONVENTIONAL, "an attribute of an imported module is a constant"),
    _rule("object-attribute", "carries", CONVENTIONAL, "`meta.count` holds the values this module gives `.count` "
          "(assignments, constructor calls of its classes): bound by the attribute's name",
          values=(20, "an attribute assigned in more than 20 places is a generic name (`.size`), not one field")),
    _rule("record-field", "carries", STRUCTURAL, "`meta.count` with `meta` a dataclass / NamedTuple / attrs record of "
          "this module whose construction is seen (`meta = Meta(...)`, a function of the module returning one, a "
          "parameter annotated `Meta`) holds what the constructor call passes for `count`, by keyword or by position "
          "in the class body's order, or the default written in the class",
          ),
    _rule("local-caller", "carries", STRUCTURAL, "a parameter has the class of what the callers in its module pass, the "
          "most varying winning",
          callers=(50, "a function called from more than 50 places is a utility; the first 50 decide"),
          depth=(40, "a call chain inside one module deeper than 40 was not seen")),
    _rule("dim-per-caller", "carries", STRUCTURAL, "`x.shape[dim]` / `x.size(dim)` / `x.stride(dim)` with `dim` a "
          "parameter to which the callers in its module pass different literals (`cumsum(x, 0)`, `cumsum(x, -1)`): the "
          "most varying of the dims they name, each classed as that literal would be (callers as in `local-caller`)"),
    _rule("caller-layout", "carries", STRUCTURAL, "a tensor parameter has the layout its callers' tensors have, when "
          "every caller's is known",
          callers=(20, "checking every caller's layout is costly; 20 covered every wrapper in the codebases measured")),
    _rule("caller-elsewhere", "carries", STRUCTURAL, "an entry parameter (no caller in its module) takes the class of "
          "what callers in other modules pass, a few levels up; structure may overturn a class resting on a name",
          levels=(4, "each level re-reads callers' files; past 4 levels no finding was added on vLLM"),
          sites=(50, "as for local callers: a function called from more than 50 sites is a utility"),
          chain=(8, "the chain shown is cut at 8 steps; the rules cited are all kept"),
          parts=(4, "the entry parameters besides the first that an unknown value joins (`p + q`, a value assigned "
                 "from p or q): each is asked of its callers and the most varying answer wins, so one part whose "
                 "callers tell nothing does not hide another that varies; past 4 parts the value is a long formula "
                 "over a configuration, not a size")),
    _rule("caller-fixed-leading", "STABLE", CONVENTIONAL, "the leading dim guessed to vary (`leading-dim`) of a "
          "tensor that is, handed down unchanged through the module's callers (itself, `.contiguous()`, `.to()`, "
          "`*_like`, `ctx.saved_tensors`), an entry parameter's, is fixed when every caller in other modules passes "
          "a tensor named like a weight (`W`, `self.weight_packed`, `kv_cache`: the `weight-like` convention), one "
          "laid out with a fixed leading dim (`x.view(1, n, d)`, `torch.empty(1, n, d)`: a packed batch of one, "
          "recorded though no other dim of it is known), or an entry parameter of its own for which the same "
          "holds, each level's callers read in the files that call it; one caller passing anything else, or none "
          "known, keeps the guess",
          levels=(4, "as for caller-elsewhere: each level re-reads callers' files")),
    _rule("batch-of-one", "STABLE", STRUCTURAL, "`x.unsqueeze(0)`, `x[None]`: a new leading dim of size 1 (a packed "
          "batch of one). The leading dim of a parameter (handed down unchanged) to which every caller in the module "
          "passes one, or a parameter of its own for which the same holds, is 1; handed to a function of another "
          "module it is recorded though nothing else of the tensor's layout is known, for `caller-fixed-leading`; "
          "with `x`'s layout known, `unsqueeze(k)` inserts the dim of size 1 into it (`allocated-layout`)"),
    _rule("held-leading", "few variants", CONVENTIONAL, "in `caller-fixed-leading`, a caller passing a tensor an "
          "object holds (`self.buf`, its name not a weight's) fixes the leading dim only as much as the object: one "
          "value per instance (a plan or buffer per CUDA-graph size), a few variants per process, reported at the low "
          "level; not a `self.x` a method other than the constructor rebinds, nor a field of a record class (a "
          "per-batch object): those keep the guess", few_variants=True),
    _rule("autograd-apply", "binds", STRUCTURAL, "`Fn.apply(a, b)` with `Fn` a `torch.autograd.Function` subclass "
          "of the module calls `Fn.forward(ctx, a, b)`, and `ctx.saved_tensors` in `Fn.backward` holds, element i, "
          "argument i of the one `ctx.save_for_backward(...)` in `forward`: callers' layouts and weight-ness pass "
          "through"),
    _rule("method-by-name", "binds", CONVENTIONAL, "`obj.m(...)` with the object's class unknown binds to the method "
          "`m` by its name, when few files define `m` and the definition nearest the call wins",
          defining_files=(3, "a method name defined in more than 3 files is generic (`forward`, `run`)"),
          calling_files=(10, "a name called from more than 10 files is generic too; reading them all cost time "
                         "for no finding")),
    _rule("conditional-import", "binds", STRUCTURAL, "a name imported more than once in one scope (`if hip: from "
          ".a.ops import f` / `else: from .b.ops import f`: one module per platform) may name any of the imported "
          "functions: a call of it is a call of each, so the callers-elsewhere steps reach the definition that "
          "launches; a later import that plainly shadows an earlier one in straight-line code is taken the same way "
          "(rare: the extra binding only adds a caller)"),
    _rule("custom-op", "binds", STRUCTURAL, "`torch.ops.ns.op(...)` calls the function registered as `ns::op`"),
    _rule("instance-call", "binds", STRUCTURAL, "`obj(...)` with `obj = Cls(...)` calls `Cls.__call__`"),
    _rule("float-default", "float", STRUCTURAL, "a parameter no caller passes, whose default is a float literal, "
          "is a float: never value-specialized"),
    _rule("default", "carries", STRUCTURAL, "a parameter a caller leaves out has the class of its default"),
    _rule("per-site-fixed", "few variants", STRUCTURAL, "a plain int fixed at each launch site (a literal) but in "
          "different value classes between sites gives a few variants per process, each compiled on first use: "
          "reported as that, at the low level, for warm-up to cover"),
    _rule("multiple-of-16", "div16", STRUCTURAL, "a value that is always a multiple of 16 (a factor of 16, "
          "`round_up(v, 16)`, a count times a 16-aligned dim; `round_up(v, 4)` of a multiple of 16 is v) is one "
          "value class however it varies"),
    _rule("count-times-dim", "div16", CONVENTIONAL, "a varying count times model dims (`x.numel()` of a tensor of "
          "unknown origin whose non-leading dims the code reads, a stride over a varying dim and fixed trailing ones "
          "that are not literals, the layout of a tensor allocated or copied with `*_like` from such dims, "
          "`rows * (x.numel() // rows)`, `x.numel() // (x.shape[-1] // heads)`: the rows times heads) is by "
          "convention a multiple of 16 whenever those dims are: one value class, so a finding resting on it is never "
          "above low (other arithmetic on it, `x.numel() - 1`, is a count again)", name_only=True),
    _rule("aligned-round-up", "div16", CONVENTIONAL, "`round_up(v, a)` is a multiple of `a`; with `a` not a literal "
          "and not varying (fixed, or a value nothing here tells of: a helper's or another module's result), "
          "alignments are by convention multiples of 16: a finding resting on it is never above low; "
          "`round_up(v, k)` of such a value with k a literal dividing 16 is v itself", name_only=True),
    # ---- guards before the launch
    _rule("alignment-guard", "div16", STRUCTURAL, "an `assert E % K == 0` (or `if E % K: raise/return`) that dominates "
          "the launch, K fixed in the code and a multiple of 16, makes E and what flows from it (`E * c`, `E // c` "
          "with c dividing K, strides of tensors allocated from it) one value class; only guards in the function body "
          "on the way to the launch (or to the call of the wrapper) count, on a value bound once"),
    _rule("alignment-guard-convention", "div16", CONVENTIONAL, "the same guard with K not fixed in the code but read "
          "as a configured alignment (a function's result, an imported name, a parameter whose default is a multiple "
          "of 16): alignments are by convention multiples of 16, so a finding resting on it is never above low; a "
          "parameter without such a default (`n % topk`) or a tensor dim is a count and proves nothing; arithmetic "
          "other than `*` on the value drops it", name_only=True),
    _rule("range-guard", "STABLE / few variants", STRUCTURAL, "an early exit or assert that dominates the launch "
          "(`if E > C: return`, `assert E <= C`, `if E == 0: return`), C fixed in the code, bounds E: one value "
          "class is STABLE; a few values are a few variants each compiled on first use, reported at the low level "
          "for warm-up to cover (values are taken for counts, >= 0)", few_variants=True, guard_bound=True,
          bound=(16, "an upper bound of 16 or less leaves at most 17 values, few enough to warm up; a bound like "
                 "`if n > MAX_TOKENS: raise` (thousands) leaves every value class and is no bound worth using")),
    _rule("empty-skip", "VARYING", CONVENTIONAL, "an early `return` or `continue` that dominates the launch and "
          "skips the case `E == 0` (`if n == 0: return`, `if not n: return`, `if n <= 0: continue`; not a `raise`, "
          "which rejects a value rather than skip an empty case): E, unknown or varying by its name alone, is a count "
          "of what this call has (requests, tokens, pairs), since a model dim or a configured size is never 0; the "
          "guard, not the name, is the evidence (a convention still: a feature switched off is 0 too)", in_place_of_name=True),
    _rule("live-slice", "VARYING", CONVENTIONAL, "a value the function uses as the stop of a leading slice, "
          "`buf[:n]`, `buf[0:n, ...]` (anywhere in its body), and that is otherwise unknown or varying by its name alone, is "
          "the part of a buffer this call uses: the live count of a buffer sized for a maximum (a model dim or "
          "configured size names a whole dim, not the part of one)", in_place_of_name=True),
    _rule("bounded-quotient", "few variants", STRUCTURAL, "a helper's return `off + M // c` (or `M >> c`), c and "
          "off fixed in the code, where early exits or the `if` branch that dominate the return bound M (bounds "
          "fixed in the code: literals, constants, a parameter every caller in the module leaves at its default) "
          "(`if M >= 4096: return 40` ... `return 8 + M // 128`; `elif M < 256: return M // 32`), takes at most "
          "hi // c - lo // c + 1 values: a hand-written bucketing, a few variants each compiled (or tuned) on first "
          "use, reported at the low level; one value is STABLE", few_variants=True, guard_bound=True,
          values=(64, "`next_power_of_2` of a 64-bit count leaves at most 64 values (`bucket`, never reported as per "
                  "call); a quotient leaving more is a count again")),
    _rule("range-one-class", "few variants", STRUCTURAL, "the same bounds leaving several values of one value class "
          "(`assert 2 <= m <= 8`): one compile as a plain int (JG001 does not report the value itself); a few values "
          "like a bucket for a `tl.constexpr`; arithmetic on it may span classes again and is reported at the low level",
          few_variants=True, guard_bound=True, one_class=True),
    # ---- names (conventions)
    _rule("name-varying", "VARYING", CONVENTIONAL, "with nothing else known, a name like `num_tokens`, `batch_size`, "
          "`seq_len`, `M` says per-call", name_only=True),
    _rule("name-stable", "STABLE", CONVENTIONAL, "with nothing else known, a name like `hidden_size`, `head_dim`, "
          "`*_stride`, UPPER_CASE says fixed", name_only=True),
    _rule("configured-name", "VARYING / STABLE", CONVENTIONAL, "a name the project lists in `[tool.jitguard]` "
          "`varying-names` / `stable-names` (or `--varying-name`): the project's own convention, so medium, not low"),
    _rule("name-over-guess", "STABLE", CONVENTIONAL, "a name that plainly says model dimension or configured maximum "
          "(`num_experts`, `max_num_reqs`) outweighs the leading-dim guess", name_only=True),
    _rule("warmup-callers", "skips", CONVENTIONAL, "callers in functions or modules named `*warmup*` enumerate variants "
          "on purpose: not evidence of serving (in the module itself a warm-up function's calls and launches are "
          "skipped as its script code is, `test-callers`)"),
    _rule("test-callers", "skips", CONVENTIONAL, "tests, benchmarks and scripts pass sizes chosen to exercise a kernel: "
          "not evidence of serving, neither that a value varies (a sweep) nor that it is fixed (one literal shape "
          "would fix a library wrapper's leading dim when its callers in production are outside the tree). Skipped: "
          "what a module runs under `if __name__ == \"__main__\":`, functions named like a test, a benchmark or a "
          "script's main (`test`, `test_*`, `test2`, `bench`, `bench_*`, `benchmark`, `benchmark_*`, `main`) and those defined inside them "
          "(their calls and launches); callers and launches in files that, in the project (below its "
          "configuration's folder), sit in a `test(s)` or `benchmark(s)` folder or are named like pytest's files "
          "(`test_*`, `*_test`, `conftest`) or "
          "a benchmark (`bench_*`, `benchmark_*`), of a wrapper or kernel defined elsewhere (a kernel defined in "
          "such a file is judged on its launches there, outside its script code)")
)

RULES: dict[str, InferenceRule] = {r.id: r for r in _ALL}
IN_PLACE_OF_NAME = frozenset(r.id for r in _ALL if r.in_place_of_name)
assert len(RULES) == len(_ALL), "duplicate rule id"


def limit(rule_id: str, name: str) -> int:
    """The value of a rule's limit (one source of truth for the numbers the code uses)."""
    return RULES[rule_id].limits[name].value


def cite(*rule_ids: str) -> tuple[str, ...]:
    """Rule ids for an evidence chain, checked against the registry."""
    for r in rule_ids:
        if r not in RULES:
            raise KeyError(f"unknown inference rule {r!r}")
    return rule_ids


def confidence(rule_ids: Iterable[str], by_name: bool = False) -> str:
    """high / medium / low for a finding whose chain cites ``rule_ids``: low when it rests on a name
    alone, medium when one step is a convention, high when every step follows from the code."""
    rule_ids = list(rule_ids)
    rules = [RULES[r] for r in rule_ids if r in RULES]
    if "configured-name" in rule_ids:
        by_name = False  # the project's own list of names: a convention it declared
    if by_name or any(r.never_above_low for r in rules):
        return "low"
    if any(r.evidence == CONVENTIONAL for r in rules):
        return "medium"
    return "high"


# ---- docs/provenance.md -------------------------------------------------------------------------
BEGIN = "<!-- inference-rules:begin (generated by python -m jitguard.static.provenance) -->"
END = "<!-- inference-rules:end -->"


def markdown() -> str:
    """The registry as the table docs/provenance.md carries between BEGIN and END."""
    lines = ["| rule | gives | evidence | why | limits |", "|---|---|---|---|---|"]
    for r in _ALL:
        limits = "; ".join(f"{name} {lim.value}: {lim.why}" for name, lim in r.limits.items())
        kind = (r.evidence + (", never above low" if r.never_above_low else "")
                + (", in place of a name (callers elsewhere settle it by structure)" if r.in_place_of_name else ""))
        lines.append(f"| `{r.id}` | {r.gives} | {kind} | {r.reason} | {limits} |")
    return "\n".join(lines)


def render_into(text: str) -> str:
    """``text`` with the generated section replaced by the registry's table."""
    head, sep, rest = text.partition(BEGIN)
    if not sep:
        raise ValueError(f"no {BEGIN!r} marker")
    _, sep2, tail = rest.partition(END)
    if not sep2:
        raise ValueError(f"no {END!r} marker")
    return f"{head}{BEGIN}\n{markdown()}\n{END}{tail}"
