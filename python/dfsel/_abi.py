"""The C ABI of include/dfsel/dfsel.h and dspark.h as ctypes declarations, field for field.

The layouts must match the header of the library that is loaded: the loader refuses a library
whose major.minor version differs from ABI_VERSION, and tests/python/test_abi_layout.py
compares every size and offset here with the C compiler's.
"""
import ctypes
import enum

from ._version import VERSION

# The header version these declarations mirror (DFSEL_VERSION_MAJOR, DFSEL_VERSION_MINOR).
ABI_VERSION = VERSION[:2]


class Status(enum.IntEnum):
    SUCCESS = 0
    INVALID_ARGUMENT = 1
    UNSUPPORTED = 2
    OUT_OF_MEMORY = 3
    CUDA_ERROR = 4
    NCCL_ERROR = 5
    IO_ERROR = 6
    FORMAT_ERROR = 7
    NO_DEVICE = 8
    INTERNAL_ERROR = 9
    TIMEOUT = 10
    BUSY = 11


class Type(enum.IntEnum):
    """dfsel_type: ggml's type ids."""
    F32 = 0
    F16 = 1
    Q4_0 = 2
    Q4_1 = 3
    Q5_0 = 6
    Q5_1 = 7
    Q8_0 = 8
    Q2_K = 10
    Q3_K = 11
    Q4_K = 12
    Q5_K = 13
    Q6_K = 14
    BF16 = 30


class Backend(enum.IntEnum):
    AUTO = 0
    CPU = 1
    CUDA = 2


class Placement(enum.IntEnum):
    REPLICATED = 0
    SHARDED = 1


class Error(Exception):
    """A failure of dfsel: `status` (a Status) and `message` (the library's or the wrapper's,
    naming the argument and its value)."""

    def __init__(self, status, message):
        try:
            status = Status(status)
        except ValueError:
            pass
        self.status = status
        self.message = message
        name = status.name if isinstance(status, Status) else str(status)
        super().__init__("%s: %s" % (name, message))


_c_enum = ctypes.c_int  # every dfsel enum fits an int (values 0..30)


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("type", _c_enum),
                ("ne", ctypes.c_int64 * 4), ("nb", ctypes.c_size_t * 4)]


class Config(ctypes.Structure):
    _fields_ = [("n_vocab", ctypes.c_int64), ("n_embd", ctypes.c_int64),
                ("codebook_rank", ctypes.c_int32), ("top_k", ctypes.c_int32),
                ("block_size", ctypes.c_int32), ("logit_scale", ctypes.c_float),
                ("softcap", ctypes.c_float), ("max_blocks", ctypes.c_int32)]


class Shard(ctypes.Structure):
    _fields_ = [("rank", ctypes.c_int32), ("n_ranks", ctypes.c_int32),
                ("v_begin", ctypes.c_int64), ("v_end", ctypes.c_int64)]


class PlanDesc(ctypes.Structure):
    _fields_ = [("config", Config), ("shard", Shard), ("backend", _c_enum),
                ("device", ctypes.c_int32), ("placement", _c_enum),
                ("e_prev", Tensor), ("e_next", Tensor), ("w_h", Tensor),
                ("nccl_comm", ctypes.c_void_p), ("workspace", ctypes.c_void_p),
                ("workspace_bytes", ctypes.c_size_t), ("n_threads", ctypes.c_int32)]


class Inputs(ctypes.Structure):
    _fields_ = [("logits", Tensor), ("hidden", Tensor), ("anchors", ctypes.c_void_p),
                ("n_blocks", ctypes.c_int32), ("temperature", ctypes.c_float),
                ("p_min", ctypes.c_float), ("seed", ctypes.c_uint64)]


class Outputs(ctypes.Structure):
    _fields_ = [("cand_ids", ctypes.c_void_p), ("unary", ctypes.c_void_p),
                ("scores", ctypes.c_void_p), ("q", ctypes.c_void_p), ("path", ctypes.c_void_p),
                ("n_emitted", ctypes.c_void_p), ("packed", ctypes.c_void_p),
                ("packed_row_stride", ctypes.c_size_t)]


# include/dfsel/dspark.h
class DSparkConfig(ctypes.Structure):
    _fields_ = [("n_vocab", ctypes.c_int64), ("n_target_vocab", ctypes.c_int64), ("n_embd", ctypes.c_int64),
                ("markov_rank", ctypes.c_int32), ("n_draft", ctypes.c_int32),
                ("sample_from_anchor", ctypes.c_int32), ("logit_scale", ctypes.c_float),
                ("softcap", ctypes.c_float), ("max_blocks", ctypes.c_int32)]


class DSparkPlanDesc(ctypes.Structure):
    _fields_ = [("config", DSparkConfig), ("shard", Shard), ("backend", _c_enum), ("device", ctypes.c_int32),
                ("placement", _c_enum), ("w1", Tensor), ("w2", Tensor), ("w2_scale", Tensor), ("conf_w", Tensor),
                ("conf_bias", ctypes.c_float), ("d2t", ctypes.c_void_p), ("nccl_comm", ctypes.c_void_p),
                ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t), ("n_threads", ctypes.c_int32)]


class DSparkInputs(ctypes.Structure):
    _fields_ = [("logits", Tensor), ("hidden", Tensor), ("anchors", ctypes.c_void_p), ("n_blocks", ctypes.c_int32),
                ("temperature", ctypes.c_float), ("p_min", ctypes.c_float), ("seed", ctypes.c_uint64)]


class DSparkOutputs(ctypes.Structure):
    _fields_ = [("n_blocks", ctypes.c_int32), ("tokens", ctypes.c_void_p), ("n_emitted", ctypes.c_void_p),
                ("draft_ids", ctypes.c_void_p), ("logits", ctypes.c_void_p), ("probs", ctypes.c_void_p),
                ("log_norm", ctypes.c_void_p), ("confidence", ctypes.c_void_p)]


# The structs the layout test checks, by their C names.
STRUCTS = {"dfsel_tensor": Tensor, "dfsel_config": Config, "dfsel_shard": Shard,
           "dfsel_plan_desc": PlanDesc, "dfsel_inputs": Inputs, "dfsel_outputs": Outputs,
           "dfsel_dspark_config": DSparkConfig, "dfsel_dspark_plan_desc": DSparkPlanDesc,
           "dfsel_dspark_inputs": DSparkInputs, "dfsel_dspark_outputs": DSparkOutputs}

_p = ctypes.POINTER
_vp = ctypes.c_void_p
_char_p = ctypes.c_char_p
# name: (restype, argtypes); plans are passed as void*.
PROTOTYPES = {
    "dfsel_status_string": (_char_p, [_c_enum]),
    "dfsel_version": (ctypes.c_int, []),
    "dfsel_cuda_device_count": (_c_enum, [_p(ctypes.c_int)]),
    "dfsel_workspace_size": (_c_enum, [_p(PlanDesc), _p(ctypes.c_size_t), _char_p, ctypes.c_size_t]),
    "dfsel_plan_create": (_c_enum, [_p(PlanDesc), _p(_vp), _char_p, ctypes.c_size_t]),
    "dfsel_plan_destroy": (_c_enum, [_vp]),
    "dfsel_plan_backend": (_c_enum, [_vp]),
    "dfsel_plan_last_error": (_char_p, [_vp]),
    "dfsel_plan_config": (_c_enum, [_vp, _p(Config)]),
    "dfsel_plan_check_memory": (_c_enum, [_vp, _vp, _char_p, _char_p, ctypes.c_size_t]),
    "dfsel_plan_run": (_c_enum, [_vp, _p(Inputs), _p(Outputs), _vp]),
    "dfsel_run_group": (_c_enum, [ctypes.c_int, _p(_vp), _p(Inputs), _p(Outputs), _p(_vp)]),
    "dfsel_plan_check": (_c_enum, [_vp, _vp]),
    "dfsel_plan_wait": (_c_enum, [_vp, _vp, ctypes.c_int64]),
    "dfsel_dspark_workspace_size": (_c_enum, [_p(DSparkPlanDesc), _p(ctypes.c_size_t), _char_p, ctypes.c_size_t]),
    "dfsel_dspark_plan_create": (_c_enum, [_p(DSparkPlanDesc), _p(_vp), _char_p, ctypes.c_size_t]),
    "dfsel_dspark_plan_destroy": (_c_enum, [_vp]),
    "dfsel_dspark_plan_backend": (_c_enum, [_vp]),
    "dfsel_dspark_plan_last_error": (_char_p, [_vp]),
    "dfsel_dspark_plan_run": (_c_enum, [_vp, _p(DSparkInputs), _p(DSparkOutputs), _vp]),
    "dfsel_dspark_run_group": (_c_enum, [ctypes.c_int, _p(_vp), _p(DSparkInputs), _p(DSparkOutputs), _p(_vp)]),
    "dfsel_dspark_plan_wait": (_c_enum, [_vp, _vp, ctypes.c_int64]),
}
