from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TimeoutReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TIMEOUT_REASON_UNSPECIFIED: _ClassVar[TimeoutReason]
    TIMEOUT_REASON_REFUSED: _ClassVar[TimeoutReason]
    TIMEOUT_REASON_EXECUTION: _ClassVar[TimeoutReason]
    TIMEOUT_REASON_ERROR: _ClassVar[TimeoutReason]
TIMEOUT_REASON_UNSPECIFIED: TimeoutReason
TIMEOUT_REASON_REFUSED: TimeoutReason
TIMEOUT_REASON_EXECUTION: TimeoutReason
TIMEOUT_REASON_ERROR: TimeoutReason

class DiffContent(_message.Message):
    __slots__ = ("nonce", "txs", "escrow_id", "post_state_root", "sealed_inference_ids")
    NONCE_FIELD_NUMBER: _ClassVar[int]
    TXS_FIELD_NUMBER: _ClassVar[int]
    ESCROW_ID_FIELD_NUMBER: _ClassVar[int]
    POST_STATE_ROOT_FIELD_NUMBER: _ClassVar[int]
    SEALED_INFERENCE_IDS_FIELD_NUMBER: _ClassVar[int]
    nonce: int
    txs: _containers.RepeatedCompositeFieldContainer[DevshardTx]
    escrow_id: str
    post_state_root: bytes
    sealed_inference_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, nonce: _Optional[int] = ..., txs: _Optional[_Iterable[_Union[DevshardTx, _Mapping]]] = ..., escrow_id: _Optional[str] = ..., post_state_root: _Optional[bytes] = ..., sealed_inference_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class DevshardTx(_message.Message):
    __slots__ = ("start_inference", "confirm_start", "finish_inference", "timeout_inference", "validation", "validation_vote", "reveal_seed", "finalize_round", "force_height_sync_turn", "heartbeat", "height_ack", "error_miss")
    START_INFERENCE_FIELD_NUMBER: _ClassVar[int]
    CONFIRM_START_FIELD_NUMBER: _ClassVar[int]
    FINISH_INFERENCE_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_INFERENCE_FIELD_NUMBER: _ClassVar[int]
    VALIDATION_FIELD_NUMBER: _ClassVar[int]
    VALIDATION_VOTE_FIELD_NUMBER: _ClassVar[int]
    REVEAL_SEED_FIELD_NUMBER: _ClassVar[int]
    FINALIZE_ROUND_FIELD_NUMBER: _ClassVar[int]
    FORCE_HEIGHT_SYNC_TURN_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_ACK_FIELD_NUMBER: _ClassVar[int]
    ERROR_MISS_FIELD_NUMBER: _ClassVar[int]
    start_inference: MsgStartInference
    confirm_start: MsgConfirmStart
    finish_inference: MsgFinishInference
    timeout_inference: MsgTimeoutInference
    validation: MsgValidation
    validation_vote: MsgValidationVote
    reveal_seed: MsgRevealSeed
    finalize_round: MsgFinalizeRound
    force_height_sync_turn: MsgForceHeightSyncTurn
    heartbeat: MsgHeartbeat
    height_ack: MsgHeightAck
    error_miss: MsgErrorMiss
    def __init__(self, start_inference: _Optional[_Union[MsgStartInference, _Mapping]] = ..., confirm_start: _Optional[_Union[MsgConfirmStart, _Mapping]] = ..., finish_inference: _Optional[_Union[MsgFinishInference, _Mapping]] = ..., timeout_inference: _Optional[_Union[MsgTimeoutInference, _Mapping]] = ..., validation: _Optional[_Union[MsgValidation, _Mapping]] = ..., validation_vote: _Optional[_Union[MsgValidationVote, _Mapping]] = ..., reveal_seed: _Optional[_Union[MsgRevealSeed, _Mapping]] = ..., finalize_round: _Optional[_Union[MsgFinalizeRound, _Mapping]] = ..., force_height_sync_turn: _Optional[_Union[MsgForceHeightSyncTurn, _Mapping]] = ..., heartbeat: _Optional[_Union[MsgHeartbeat, _Mapping]] = ..., height_ack: _Optional[_Union[MsgHeightAck, _Mapping]] = ..., error_miss: _Optional[_Union[MsgErrorMiss, _Mapping]] = ...) -> None: ...

class MsgStartInference(_message.Message):
    __slots__ = ("inference_id", "prompt_hash", "model", "input_length", "max_tokens", "started_at", "observed_height", "observed_block_hash", "protocol_version")
    INFERENCE_ID_FIELD_NUMBER: _ClassVar[int]
    PROMPT_HASH_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    INPUT_LENGTH_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_HEIGHT_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_BLOCK_HASH_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    inference_id: int
    prompt_hash: bytes
    model: str
    input_length: int
    max_tokens: int
    started_at: int
    observed_height: int
    observed_block_hash: bytes
    protocol_version: str
    def __init__(self, inference_id: _Optional[int] = ..., prompt_hash: _Optional[bytes] = ..., model: _Optional[str] = ..., input_length: _Optional[int] = ..., max_tokens: _Optional[int] = ..., started_at: _Optional[int] = ..., observed_height: _Optional[int] = ..., observed_block_hash: _Optional[bytes] = ..., protocol_version: _Optional[str] = ...) -> None: ...

class MsgConfirmStart(_message.Message):
    __slots__ = ("inference_id", "executor_sig", "confirmed_at", "observed_height", "observed_block_hash")
    INFERENCE_ID_FIELD_NUMBER: _ClassVar[int]
    EXECUTOR_SIG_FIELD_NUMBER: _ClassVar[int]
    CONFIRMED_AT_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_HEIGHT_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_BLOCK_HASH_FIELD_NUMBER: _ClassVar[int]
    inference_id: int
    executor_sig: bytes
    confirmed_at: int
    observed_height: int
    observed_block_hash: bytes
    def __init__(self, inference_id: _Optional[int] = ..., executor_sig: _Optional[bytes] = ..., confirmed_at: _Optional[int] = ..., observed_height: _Optional[int] = ..., observed_block_hash: _Optional[bytes] = ...) -> None: ...

class MsgFinishInference(_message.Message):
    __slots__ = ("inference_id", "response_hash", "input_tokens", "output_tokens", "executor_slot", "proposer_sig", "escrow_id", "observed_height", "observed_block_hash", "served_hash")
    INFERENCE_ID_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_HASH_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    EXECUTOR_SLOT_FIELD_NUMBER: _ClassVar[int]
    PROPOSER_SIG_FIELD_NUMBER: _ClassVar[int]
    ESCROW_ID_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_HEIGHT_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_BLOCK_HASH_FIELD_NUMBER: _ClassVar[int]
    SERVED_HASH_FIELD_NUMBER: _ClassVar[int]
    inference_id: int
    response_hash: bytes
    input_tokens: int
    output_tokens: int
    executor_slot: int
    proposer_sig: bytes
    escrow_id: str
    observed_height: int
    observed_block_hash: bytes
    served_hash: bytes
    def __init__(self, inference_id: _Optional[int] = ..., response_hash: _Optional[bytes] = ..., input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., executor_slot: _Optional[int] = ..., proposer_sig: _Optional[bytes] = ..., escrow_id: _Optional[str] = ..., observed_height: _Optional[int] = ..., observed_block_hash: _Optional[bytes] = ..., served_hash: _Optional[bytes] = ...) -> None: ...

class TimeoutVote(_message.Message):
    __slots__ = ("voter_slot", "accept", "signature")
    VOTER_SLOT_FIELD_NUMBER: _ClassVar[int]
    ACCEPT_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    voter_slot: int
    accept: bool
    signature: bytes
    def __init__(self, voter_slot: _Optional[int] = ..., accept: _Optional[bool] = ..., signature: _Optional[bytes] = ...) -> None: ...

class MsgTimeoutInference(_message.Message):
    __slots__ = ("inference_id", "reason", "votes")
    INFERENCE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    VOTES_FIELD_NUMBER: _ClassVar[int]
    inference_id: int
    reason: TimeoutReason
    votes: _containers.RepeatedCompositeFieldContainer[TimeoutVote]
    def __init__(self, inference_id: _Optional[int] = ..., reason: _Optional[_Union[TimeoutReason, str]] = ..., votes: _Optional[_Iterable[_Union[TimeoutVote, _Mapping]]] = ...) -> None: ...

class ErrorMissVote(_message.Message):
    __slots__ = ("voter_slot", "accept", "signature")
    VOTER_SLOT_FIELD_NUMBER: _ClassVar[int]
    ACCEPT_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    voter_slot: int
    accept: bool
    signature: bytes
    def __init__(self, voter_slot: _Optional[int] = ..., accept: _Optional[bool] = ..., signature: _Optional[bytes] = ...) -> None: ...

class MsgErrorMiss(_message.Message):
    __slots__ = ("inference_id", "votes")
    INFERENCE_ID_FIELD_NUMBER: _ClassVar[int]
    VOTES_FIELD_NUMBER: _ClassVar[int]
    inference_id: int
    votes: _containers.RepeatedCompositeFieldContainer[ErrorMissVote]
    def __init__(self, inference_id: _Optional[int] = ..., votes: _Optional[_Iterable[_Union[ErrorMissVote, _Mapping]]] = ...) -> None: ...

class MsgValidation(_message.Message):
    __slots__ = ("inference_id", "validator_slot", "valid", "proposer_sig", "escrow_id")
    INFERENCE_ID_FIELD_NUMBER: _ClassVar[int]
    VALIDATOR_SLOT_FIELD_NUMBER: _ClassVar[int]
    VALID_FIELD_NUMBER: _ClassVar[int]
    PROPOSER_SIG_FIELD_NUMBER: _ClassVar[int]
    ESCROW_ID_FIELD_NUMBER: _ClassVar[int]
    inference_id: int
    validator_slot: int
    valid: bool
    proposer_sig: bytes
    escrow_id: str
    def __init__(self, inference_id: _Optional[int] = ..., validator_slot: _Optional[int] = ..., valid: _Optional[bool] = ..., proposer_sig: _Optional[bytes] = ..., escrow_id: _Optional[str] = ...) -> None: ...

class MsgValidationVote(_message.Message):
    __slots__ = ("inference_id", "voter_slot", "vote_valid", "proposer_sig", "escrow_id")
    INFERENCE_ID_FIELD_NUMBER: _ClassVar[int]
    VOTER_SLOT_FIELD_NUMBER: _ClassVar[int]
    VOTE_VALID_FIELD_NUMBER: _ClassVar[int]
    PROPOSER_SIG_FIELD_NUMBER: _ClassVar[int]
    ESCROW_ID_FIELD_NUMBER: _ClassVar[int]
    inference_id: int
    voter_slot: int
    vote_valid: bool
    proposer_sig: bytes
    escrow_id: str
    def __init__(self, inference_id: _Optional[int] = ..., voter_slot: _Optional[int] = ..., vote_valid: _Optional[bool] = ..., proposer_sig: _Optional[bytes] = ..., escrow_id: _Optional[str] = ...) -> None: ...

class MsgRevealSeed(_message.Message):
    __slots__ = ("slot_id", "signature", "proposer_sig", "escrow_id")
    SLOT_ID_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    PROPOSER_SIG_FIELD_NUMBER: _ClassVar[int]
    ESCROW_ID_FIELD_NUMBER: _ClassVar[int]
    slot_id: int
    signature: bytes
    proposer_sig: bytes
    escrow_id: str
    def __init__(self, slot_id: _Optional[int] = ..., signature: _Optional[bytes] = ..., proposer_sig: _Optional[bytes] = ..., escrow_id: _Optional[str] = ...) -> None: ...

class MsgFinalizeRound(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class MsgForceHeightSyncTurn(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class MsgHeartbeat(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class MsgHeightAck(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
