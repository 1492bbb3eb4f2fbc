"""The fast step (``DecodeOptions.fast_step``): a lean decoder step for Marian and BART, the Hugging Face
decoder's arithmetic without its modules.

``beam_search`` calls the decoder once per step for one token per hypothesis. Profiled on the demo model
(1 thread, 2026-11-24): Hugging Face's step took 6-8 ms at 5 rows, most of it outside arithmetic (a module
call per projection, layer norm and layer, its cache classes: a concatenation and a reorder per layer and
step, mask building), and 12-15 ms at 40 rows, 60% of it the products (``F.linear``: MKL, slow at these
row counts on this host), 15% the cache's reorder and concatenation. :class:`FastStep` reads the
model's decoder weights once and runs the same operations as plain functional calls:

- token embedding times the model's ``embed_scale`` plus the position embedding of position ``cur_len - 1``
  (Marian: its sinusoidal table; BART: its learned table at offset 2, then ``layernorm_embedding``);
- per layer, post-LN as both models are: self-attention (q, k, v in one fused projection; the new key and
  value written in place into a static cache), residual, layer norm; cross-attention over the encoder
  output with the source padding as an additive bias (keys and values projected once per call, per
  *sentence*: a sentence's beams share them, so they are never reordered or repeated), residual, layer
  norm; FFN with the model's activation, residual, layer norm;
- ``lm_head`` plus ``final_logits_bias``.

The self-attention cache is one tensor [2 x layers, rows, heads, capacity, head_dim] (keys and values of
every layer): one ``index_select`` over rows reorders all of it (the beams' moves) or keeps some rows
(finished sentences dropped), and the first step (run once per sentence) is repeated K times by one
``repeat_interleave``. Its capacity starts at 4 positions and grows by doubling up to ``max_length`` (a
reorder copies the whole buffer, so it stays within twice the filled length).

On CPU in float32 the projections run on oneDNN with weights packed once (``torch.ops.mkldnn``, what
``torch.compile`` uses for CPU linears; ``PARAFORGE_FAST_STEP_ONEDNN=0``: ``F.linear``): on this project's
AMD hosts MKL's small-batch sgemm took 2-5x as long at 5-40 rows. The packed copies (the output layer
included) cost the decoder's weights' size in memory once more.

``int8=True`` (``decode(..., int8=True)``, ``paraphrase --int8``; CPU only, off by default) runs every
projection of the step, the output layer's included, on dynamic int8 weights instead: each weight row
quantised once to int8 with its own scale (max |w| / 127), activations quantised per call (torch's
``quantized.linear_dynamic``, what ``torch.ao``'s dynamic quantisation runs). The products take about
half the time; outputs are no longer Hugging Face's (README, *Decoding speed*, says how often they
change). The encoder stays in float32.

Results equal Hugging Face's up to float rounding (the attention is plain matmul + softmax, not
``scaled_dot_product_attention``; q, k and v come from one product; oneDNN sums in another order): tests
compare logits within 1e-5 (oneDNN: 1e-5 + 1e-6 x |logit|) and decoded tokens exactly.
"""

from __future__ import annotations

import os
import weakref

import torch
import torch.nn.functional as F

from .hf_compat import run_encoder

_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def onednn_by_env() -> bool:
    """``PARAFORGE_FAST_STEP_ONEDNN=0`` keeps the fast step's projections on ``torch.nn.functional.linear``
    (MKL) instead of oneDNN with pre-packed weights."""
    return os.environ.get("PARAFORGE_FAST_STEP_ONEDNN", "1").strip().lower() not in ("0", "false", "no", "off")


_ONEDNN_OK: bool | None = None
PACK_ROWS_HINT = 64  # the row count oneDNN lays the packed weights out for (any row count works)
INITIAL_CAPACITY = 4  # positions of the self-attention cache before its first doubling


def _onednn_linear_works() -> bool:
    """Whether this torch has oneDNN's packed linear (``torch.ops.mkldnn``: what ``torch.compile`` uses for
    CPU linears) and it computes what ``F.linear`` computes; checked once per process."""
    global _ONEDNN_OK
    if _ONEDNN_OK is None:
        try:
            if not torch.backends.mkldnn.is_available():
                raise RuntimeError("no oneDNN")
            g = torch.Generator().manual_seed(0)
            w, b = torch.randn(48, 32, generator=g), torch.randn(48, generator=g)
            x = torch.randn(7, 32, generator=g)
            packed = torch.ops.mkldnn._reorder_linear_weight(w, PACK_ROWS_HINT)
            y = torch.ops.mkldnn._linear_pointwise(x, packed, b, "none", [], "")
            _ONEDNN_OK = bool(torch.allclose(y, F.linear(x, w, b), rtol=1e-5, atol=1e-5))
        except Exception:  # noqa: BLE001 - any failure: plain F.linear
            _ONEDNN_OK = False
    return _ONEDNN_OK


_INT8_OK: bool | None = None


def int8_linear_works() -> bool:
    """Whether this torch runs dynamic int8 linears (``torch.ops.quantized``, an x86/fbgemm engine) and they
    compute F.linear to within int8's error; checked once per process."""
    global _INT8_OK
    if _INT8_OK is None:
        try:
            g = torch.Generator().manual_seed(0)
            w, b = torch.randn(48, 32, generator=g), torch.randn(48, generator=g)
            x = torch.randn(7, 32, generator=g)
            y = _int8_linear(x, _int8_pack(w), b)
            _INT8_OK = bool(torch.allclose(y, F.linear(x, w, b), rtol=0.05, atol=0.25))
        except Exception:  # noqa: BLE001 - any failure: not available
            _INT8_OK = False
    return _INT8_OK


def _int8_pack(w: torch.Tensor):
    """``w`` [out, in] as int8 with one scale per output row (symmetric), packed for the dynamic linear."""
    import warnings

    w = w.detach().float().contiguous()
    scale = (w.abs().amax(1) / 127.0).clamp(min=1e-12).double()
    with warnings.catch_warnings():  # (torch 2.13 marks quantized tensor creation deprecated; pinned here)
        warnings.simplefilter("ignore", UserWarning)
        q = torch.quantize_per_channel(w, scale, torch.zeros(len(scale), dtype=torch.long), 0, torch.qint8)
    return torch.ops.quantized.linear_prepack(q, None)


def _int8_linear(x: torch.Tensor, packed, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x @ w.T (+ bias) with ``packed`` from :func:`_int8_pack`; x quantised per call (7-bit range on
    x86, as ``torch.ao``'s dynamic quantisation does there). The bias is added apart, in float32: the
    output layer's ``final_logits_bias`` is read as it is at each call."""
    y = torch.ops.quantized.linear_dynamic(x, packed, True)
    return y.add_(bias) if bias is not None else y


def enabled_by_env() -> bool | None:
    """``PARAFORGE_FAST_STEP``: ``0`` turns the fast step off (every model then runs Hugging Face's decoder),
    ``1`` on wherever the model is supported, GPUs included; unset (None): the default, on CPU only (the fast
    step has not been measured or compared on a GPU yet)."""
    v = os.environ.get("PARAFORGE_FAST_STEP", "").strip().lower()
    if not v:
        return None
    return v not in ("0", "false", "no", "off")


def default_on(device: torch.device) -> bool:
    """Whether ``beam_search`` takes the fast step when neither its argument nor the environment says."""
    env = enabled_by_env()
    return device.type == "cpu" if env is None else env


def _kind(model) -> str | None:
    try:
        from transformers import BartForConditionalGeneration, MarianMTModel
    except ImportError:  # pragma: no cover - transformers is a requirement
        return None
    if type(model) is MarianMTModel:
        return "marian"
    if type(model) is BartForConditionalGeneration:
        return "bart"
    return None


def supported(model) -> bool:
    """A model this step reproduces: Marian or BART (post-LN decoders), in eval mode, eager-style inference
    (no dropout), with the layer layout this module reads."""
    kind = _kind(model)
    if kind is None or model.training:
        return False
    dec = model.model.decoder
    try:
        layer = dec.layers[0]
        layer.self_attn.q_proj, layer.encoder_attn.k_proj, layer.fc1, layer.final_layer_norm  # noqa: B018
    except (AttributeError, IndexError):
        return False
    if kind == "bart" and getattr(dec.embed_positions, "offset", None) != 2:
        return False
    return model.get_output_embeddings() is not None


def for_model(model, int8: bool = False) -> FastStep | None:
    """The fast step of ``model`` (built once and reused while its weights are unchanged; with ``int8``
    its int8 twin, kept beside it), or None for a model it does not support."""
    if not supported(model):
        return None
    key = _weights_key(model)
    built = _CACHE.setdefault(model, {})
    hit = built.get(int8)
    if hit is not None and hit.key == key:
        return hit
    fast = built[int8] = FastStep(model, key, int8=int8)
    return fast


def _weights_key(model) -> tuple:
    """Changes whenever a decoder parameter is replaced or modified in place (the fused or packed copies go
    stale), or the oneDNN switch changes."""
    out = model.get_output_embeddings().weight
    flb = getattr(model, "final_logits_bias", None)
    return (
        onednn_by_env(),
        (out.data_ptr(), out._version),
        None if flb is None else flb.data_ptr(),
        *((p.data_ptr(), p._version) for p in model.model.decoder.parameters()),
    )


class _Layer:
    __slots__ = (
        "w_qkv",
        "b_qkv",
        "w_o",
        "b_o",
        "ln1",
        "w_cq",
        "b_cq",
        "w_ck",
        "b_ck",
        "w_cv",
        "b_cv",
        "w_co",
        "b_co",
        "ln2",
        "w_fc1",
        "b_fc1",
        "w_fc2",
        "b_fc2",
        "ln3",
        "act",
    )


def _onednn_linear(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


def _ln(mod):
    return (tuple(mod.normalized_shape), mod.weight, mod.bias, mod.eps)


def _act(fn):
    if isinstance(fn, torch.nn.SiLU) or type(fn).__name__ == "SiLUActivation":
        return F.silu
    if isinstance(fn, torch.nn.ReLU):
        return F.relu
    if type(fn).__name__ == "GELUActivation" and getattr(fn, "act", None) is F.gelu:
        return F.gelu
    return fn


class FastStep:
    """The decoder weights of one Marian/BART model, read once; :meth:`start` makes a per-call state (the
    step interface of ``step.py``)."""

    def __init__(self, model, key=None, int8: bool = False):
        self.key = key
        self._model = weakref.ref(model)  # (for its encoder; weak: the cache of steps is keyed by the model)
        ref = model.get_output_embeddings().weight
        if int8 and not (ref.device.type == "cpu" and ref.dtype == torch.float32 and int8_linear_works()):
            raise ValueError("int8 needs a float32 model on the CPU and torch's quantized x86 engine")
        self.int8 = int8
        # oneDNN with weights packed once: on CPUs where MKL's small-batch sgemm is slow (AMD EPYC here:
        # 2-5x at 5-40 rows), its products cost what CTranslate2's do; results differ in the last bits
        self.onednn = (
            not int8
            and ref.device.type == "cpu"
            and ref.dtype == torch.float32
            and onednn_by_env()
            and _onednn_linear_works()
        )
        self.kind = _kind(model)
        dec = model.model.decoder
        a0 = dec.layers[0].self_attn
        self.heads, self.head_dim = a0.num_heads, a0.head_dim
        self.scaling = a0.scaling
        self.d = a0.embed_dim
        self.n_layers = len(dec.layers)
        with torch.no_grad():
            self.embed = dec.embed_tokens.weight
            if self.kind == "marian":
                self.embed_scale = dec.embed_scale
                self.positions = dec.embed_positions.weight  # sinusoidal, row = position
                self.pos_offset = 0
                self.ln_embed = None
            else:
                self.embed_scale = getattr(dec.embed_tokens, "embed_scale", 1.0)
                self.positions = dec.embed_positions.weight  # learned, row = position + 2
                self.pos_offset = dec.embed_positions.offset
                self.ln_embed = _ln(dec.layernorm_embedding)
            self.layers = []
            for layer in dec.layers:
                s, c = layer.self_attn, layer.encoder_attn
                L = _Layer()
                L.w_qkv = torch.cat([s.q_proj.weight, s.k_proj.weight, s.v_proj.weight], 0)
                L.b_qkv = torch.cat([s.q_proj.bias, s.k_proj.bias, s.v_proj.bias], 0)
                L.w_o, L.b_o = s.out_proj.weight, s.out_proj.bias
                L.ln1 = _ln(layer.self_attn_layer_norm)
                L.w_cq, L.b_cq = c.q_proj.weight, c.q_proj.bias
                L.w_ck, L.b_ck = c.k_proj.weight, c.k_proj.bias
                L.w_cv, L.b_cv = c.v_proj.weight, c.v_proj.bias
                L.w_co, L.b_co = c.out_proj.weight, c.out_proj.bias
                L.ln2 = _ln(layer.encoder_attn_layer_norm)
                L.w_fc1, L.b_fc1 = layer.fc1.weight, layer.fc1.bias
                L.w_fc2, L.b_fc2 = layer.fc2.weight, layer.fc2.bias
                L.ln3 = _ln(layer.final_layer_norm)
                L.act = _act(layer.activation_fn)
                self.layers.append(L)
            self.lm_head = model.get_output_embeddings().weight
            # (the buffer itself, not a copy: changed in place, it is read as it is; no reference to the model,
            # which keys the cache weakly)
            self.final_bias = getattr(model, "final_logits_bias", None)
        self.vocab = self.lm_head.shape[0]
        if self.onednn or int8:
            with torch.no_grad():
                pack = (
                    _int8_pack
                    if int8
                    else (lambda w: torch.ops.mkldnn._reorder_linear_weight(w.detach(), PACK_ROWS_HINT))
                )
                for L in self.layers:
                    for name in ("w_qkv", "w_o", "w_cq", "w_ck", "w_cv", "w_co", "w_fc1", "w_fc2"):
                        setattr(L, name, pack(getattr(L, name)))
                self.lm_head = pack(self.lm_head)
            self.linear = _int8_linear if int8 else _onednn_linear
        else:
            self.linear = F.linear

    @property
    def rows_leave_exactly(self) -> bool:
        """On oneDNN a row's products do not depend on the row count (with ``place_cross_rows``): rows may
        leave the batch without changing a bit of the others' logits."""
        return self.onednn

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The model's encoder output [B, S, d] (Hugging Face's encoder: only the decoder is lean)."""
        return run_encoder(self._model(), input_ids, attention_mask)

    def start(self, encoder_hidden: torch.Tensor, encoder_mask: torch.Tensor | None, max_length: int) -> FastStepState:
        """The state of one call: cross-attention keys and values of every layer for the B sentences'
        encoder output [B, S, d] (padding ``encoder_mask`` [B, S] 0 as an additive bias), an empty
        self-attention cache for B rows (one per sentence; :meth:`FastStepState.repeat` makes K beams)."""
        return FastStepState(self, encoder_hidden, encoder_mask, max_length)


class FastStepState:
    """One beam search's decoder state: rows are hypotheses, sentence-major (rows // beams = sentence)."""

    def __init__(self, fast: FastStep, enc: torch.Tensor, mask: torch.Tensor | None, max_length: int):
        self.fast = fast
        B, S, _ = enc.shape
        h, hd = fast.heads, fast.head_dim
        self.max_length = max_length
        with torch.no_grad():
            ck, cv = [], []
            for L in fast.layers:
                e2 = enc.reshape(B * S, -1)
                ck.append(fast.linear(e2, L.w_ck, L.b_ck).view(B, S, h, hd).transpose(1, 2))
                cv.append(fast.linear(e2, L.w_cv, L.b_cv).view(B, S, h, hd).transpose(1, 2))
            self.cross_kT = torch.stack(ck).transpose(-1, -2).contiguous()  # [layers, B, heads, hd, S]
            self.cross_v = torch.stack(cv).contiguous()  # [layers, B, heads, S, hd]
            if mask is not None and not bool(mask.all()):
                bias = (1.0 - mask.to(enc.dtype)) * torch.finfo(enc.dtype).min
                self.cross_bias = bias[:, None, None, :]  # [B, 1, 1, S]
            else:
                self.cross_bias = None
        # (a small first capacity: a reorder copies the whole buffer, and doubling from 4 keeps it within twice
        # the filled length from the first step on; from 16, outputs of ~8 tokens copied twice what they use.
        # Paired runs on the demo model: 0.94-0.97 of the time with 16, outputs identical)
        self.capacity = min(max_length, INITIAL_CAPACITY)
        self.kv = torch.zeros(2 * fast.n_layers, B, h, self.capacity, hd, dtype=enc.dtype, device=enc.device)
        self._spare: torch.Tensor | None = None  # the previous step's cache, reused by _take_rows
        self.sentences = B
        self.cross_places: tuple[torch.Tensor, int] | None = None  # (see place_cross_rows)

    @property
    def rows(self) -> int:
        return self.kv.shape[1]

    def repeat(self, times: int) -> None:
        """Each row ``times`` times in a row (the first step ran once per sentence)."""
        self.kv = self.kv.repeat_interleave(times, dim=1)

    def _take_rows(self, rows: torch.Tensor) -> None:
        """``kv = kv[:, rows]`` into the spare buffer of the previous step (then the old one is the spare): a
        fresh result of this size (tens of MB) costs page faults on every step, and a 3-D view copies in
        longer runs than the 5-D tensor (measured 3-7x faster at 160 rows)."""
        src = self.kv
        shape = (src.shape[0], len(rows), *src.shape[2:])
        spare = self._spare
        if spare is None or spare.shape != shape:
            spare = src.new_empty(shape)
        torch.index_select(src.view(shape[0], src.shape[1], -1), 1, rows, out=spare.view(shape[0], shape[1], -1))
        self._spare, self.kv = src, spare

    def reorder(self, rows: torch.Tensor) -> None:
        """The self-attention cache for the hypotheses' new source ``rows`` (the beams' moves)."""
        self._take_rows(rows)

    def select(self, self_rows: torch.Tensor, kept_sentences: torch.Tensor | None) -> None:
        """Keep some sentences only: the self-attention cache takes ``self_rows`` (beams' moves folded in),
        the cross-attention keys, values and bias the ``kept_sentences`` (positions in the current layout;
        None: every sentence stays, fewer of its rows)."""
        self._take_rows(self_rows)
        if kept_sentences is None:
            return
        self.cross_kT = self.cross_kT.index_select(1, kept_sentences)
        self.cross_v = self.cross_v.index_select(1, kept_sentences)
        if self.cross_bias is not None:
            self.cross_bias = self.cross_bias.index_select(0, kept_sentences)
        self.sentences = len(kept_sentences)

    def place_cross_rows(self, places: torch.Tensor | None, width: int = 0) -> None:
        """Run the cross-attention as if every sentence still had ``width`` rows, row r at ``places[r]`` of the
        [sentences x width] block (None: the rows as they are). For a sampler whose finished rows leave the
        batch (``diverse.sample_batch``): the products of the queries with a short source's keys gave other
        last bits at another row count (MKL; source lengths 6 and 9 of the demo model, not 8 or 13), so the
        kept rows' logits would no longer equal the full batch's; the other products are per row."""
        self.cross_places = None if places is None else (places, width)

    def history(self, seqs: torch.Tensor, cur_len: int) -> torch.Tensor:
        """What ``generate``'s logits processors read: the decoder's tokens so far."""
        return seqs[:, :cur_len]

    def _grow(self, need: int) -> None:
        cap = min(self.max_length, max(need, 2 * self.capacity))
        kv = self.kv.new_zeros(*self.kv.shape[:3], cap, self.kv.shape[4])
        kv[:, :, :, : self.capacity].copy_(self.kv)
        self.kv, self.capacity = kv, cap

    @torch.no_grad()
    def step(self, tokens: torch.Tensor, position: int) -> torch.Tensor:
        """Logits [rows, V] (lm_head + final_logits_bias) for one token per row at ``position`` (cur_len - 1),
        attending to the positions before it in the cache and writing its keys and values there."""
        fast = self.fast
        if position >= self.capacity:
            self._grow(position + 1)
        R = tokens.shape[0]
        Bs = self.sentences
        per = R // Bs  # queries per sentence (1 at the first step, else K)
        h, hd, d = fast.heads, fast.head_dim, fast.d
        linear = fast.linear
        x = F.embedding(tokens, fast.embed)
        if fast.embed_scale != 1.0:
            x = x * fast.embed_scale
        x = x + fast.positions[position + fast.pos_offset]
        if fast.ln_embed is not None:
            x = F.layer_norm(x, *fast.ln_embed)
        kv = self.kv
        n = position + 1
        bias = self.cross_bias
        places, width = self.cross_places if self.cross_places is not None else (None, per)
        for i, L in enumerate(fast.layers):
            # self-attention: this token's key and value into the cache, then attend to positions 0..position
            qkv = linear(x, L.w_qkv, L.b_qkv).view(R, 3, h, hd)
            kv[2 * i : 2 * i + 2, :, :, position].copy_(qkv[:, 1:].transpose(0, 1))
            q = qkv[:, 0].unsqueeze(2)  # [R, h, 1, hd]
            w = torch.matmul(q, kv[2 * i, :, :, :n].transpose(-1, -2)) * fast.scaling  # [R, h, 1, n]
            w = torch.softmax(w, dim=-1)
            a = torch.matmul(w, kv[2 * i + 1, :, :, :n]).view(R, d)
            x = F.layer_norm(x + linear(a, L.w_o, L.b_o), *L.ln1)
            # cross-attention: a sentence's beams query its encoder keys together
            q = linear(x, L.w_cq, L.b_cq)
            if places is not None:  # each row in its former place of a full block (zeros elsewhere)
                q = q.new_zeros(Bs * width, d).index_copy_(0, places, q)
            q = q.view(Bs, width, h, hd).transpose(1, 2)  # [Bs, h, width, hd]
            w = torch.matmul(q, self.cross_kT[i]) * fast.scaling  # [Bs, h, width, S]
            if bias is not None:
                w = w + bias
            w = torch.softmax(w, dim=-1)
            a = torch.matmul(w, self.cross_v[i]).transpose(1, 2).reshape(Bs * width, d)
            if places is not None:
                a = a.index_select(0, places)
            x = F.layer_norm(x + linear(a, L.w_co, L.b_co), *L.ln2)
            # FFN
            y = linear(L.act(linear(x, L.w_fc1, L.b_fc1)), L.w_fc2, L.b_fc2)
            x = F.layer_norm(x + y, *L.ln3)
        if fast.final_bias is not None:
            return linear(x, fast.lm_head, fast.final_bias[0])
        return linear(x, fast.lm_head)
