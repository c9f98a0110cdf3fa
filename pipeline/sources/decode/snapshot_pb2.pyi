from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class HostModelStatsProto(_message.Message):
    __slots__ = ("model", "prompt_tokens", "completion_tokens", "inference_count", "cost")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    INFERENCE_COUNT_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    model: str
    prompt_tokens: int
    completion_tokens: int
    inference_count: int
    cost: int
    def __init__(self, model: _Optional[str] = ..., prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., inference_count: _Optional[int] = ..., cost: _Optional[int] = ...) -> None: ...

class HostStatsProto(_message.Message):
    __slots__ = ("slot_id", "missed", "invalid", "cost", "required_validations", "completed_validations")
    SLOT_ID_FIELD_NUMBER: _ClassVar[int]
    MISSED_FIELD_NUMBER: _ClassVar[int]
    INVALID_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    REQUIRED_VALIDATIONS_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_VALIDATIONS_FIELD_NUMBER: _ClassVar[int]
    slot_id: int
    missed: int
    invalid: int
    cost: int
    required_validations: int
    completed_validations: int
    def __init__(self, slot_id: _Optional[int] = ..., missed: _Optional[int] = ..., invalid: _Optional[int] = ..., cost: _Optional[int] = ..., required_validations: _Optional[int] = ..., completed_validations: _Optional[int] = ...) -> None: ...

class HostStatsModelLineProto(_message.Message):
    __slots__ = ("model_stats",)
    MODEL_STATS_FIELD_NUMBER: _ClassVar[int]
    model_stats: _containers.RepeatedCompositeFieldContainer[HostModelStatsProto]
    def __init__(self, model_stats: _Optional[_Iterable[_Union[HostModelStatsProto, _Mapping]]] = ...) -> None: ...

class HostStatsCounterLineProto(_message.Message):
    __slots__ = ("validated", "finished")
    VALIDATED_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    validated: int
    finished: int
    def __init__(self, validated: _Optional[int] = ..., finished: _Optional[int] = ...) -> None: ...

class InferenceRecordProto(_message.Message):
    __slots__ = ("inference_id", "status", "executor_slot", "model", "prompt_hash", "response_hash", "input_length", "max_tokens", "input_tokens", "output_tokens", "reserved_cost", "actual_cost", "started_at", "confirmed_at", "votes_valid", "votes_invalid", "validated_by", "started_at_height", "confirmed_at_height")
    INFERENCE_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    EXECUTOR_SLOT_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PROMPT_HASH_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_HASH_FIELD_NUMBER: _ClassVar[int]
    INPUT_LENGTH_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    RESERVED_COST_FIELD_NUMBER: _ClassVar[int]
    ACTUAL_COST_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    CONFIRMED_AT_FIELD_NUMBER: _ClassVar[int]
    VOTES_VALID_FIELD_NUMBER: _ClassVar[int]
    VOTES_INVALID_FIELD_NUMBER: _ClassVar[int]
    VALIDATED_BY_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_HEIGHT_FIELD_NUMBER: _ClassVar[int]
    CONFIRMED_AT_HEIGHT_FIELD_NUMBER: _ClassVar[int]
    inference_id: int
    status: int
    executor_slot: int
    model: str
    prompt_hash: bytes
    response_hash: bytes
    input_length: int
    max_tokens: int
    input_tokens: int
    output_tokens: int
    reserved_cost: int
    actual_cost: int
    started_at: int
    confirmed_at: int
    votes_valid: int
    votes_invalid: int
    validated_by: bytes
    started_at_height: int
    confirmed_at_height: int
    def __init__(self, inference_id: _Optional[int] = ..., status: _Optional[int] = ..., executor_slot: _Optional[int] = ..., model: _Optional[str] = ..., prompt_hash: _Optional[bytes] = ..., response_hash: _Optional[bytes] = ..., input_length: _Optional[int] = ..., max_tokens: _Optional[int] = ..., input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., reserved_cost: _Optional[int] = ..., actual_cost: _Optional[int] = ..., started_at: _Optional[int] = ..., confirmed_at: _Optional[int] = ..., votes_valid: _Optional[int] = ..., votes_invalid: _Optional[int] = ..., validated_by: _Optional[bytes] = ..., started_at_height: _Optional[int] = ..., confirmed_at_height: _Optional[int] = ...) -> None: ...

class SessionConfigProto(_message.Message):
    __slots__ = ("refusal_timeout", "execution_timeout", "token_price", "create_devshard_fee", "fee_per_nonce", "vote_threshold", "validation_rate", "seal_grace_nonces", "inference_clear_grace_seconds")
    REFUSAL_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    TOKEN_PRICE_FIELD_NUMBER: _ClassVar[int]
    CREATE_DEVSHARD_FEE_FIELD_NUMBER: _ClassVar[int]
    FEE_PER_NONCE_FIELD_NUMBER: _ClassVar[int]
    VOTE_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    VALIDATION_RATE_FIELD_NUMBER: _ClassVar[int]
    SEAL_GRACE_NONCES_FIELD_NUMBER: _ClassVar[int]
    INFERENCE_CLEAR_GRACE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    refusal_timeout: int
    execution_timeout: int
    token_price: int
    create_devshard_fee: int
    fee_per_nonce: int
    vote_threshold: int
    validation_rate: int
    seal_grace_nonces: int
    inference_clear_grace_seconds: int
    def __init__(self, refusal_timeout: _Optional[int] = ..., execution_timeout: _Optional[int] = ..., token_price: _Optional[int] = ..., create_devshard_fee: _Optional[int] = ..., fee_per_nonce: _Optional[int] = ..., vote_threshold: _Optional[int] = ..., validation_rate: _Optional[int] = ..., seal_grace_nonces: _Optional[int] = ..., inference_clear_grace_seconds: _Optional[int] = ...) -> None: ...

class SlotAssignmentProto(_message.Message):
    __slots__ = ("slot_id", "validator_address")
    SLOT_ID_FIELD_NUMBER: _ClassVar[int]
    VALIDATOR_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    slot_id: int
    validator_address: str
    def __init__(self, slot_id: _Optional[int] = ..., validator_address: _Optional[str] = ...) -> None: ...

class EscrowStateProto(_message.Message):
    __slots__ = ("escrow_id", "state_root_and_protocol_version", "config", "group", "balance", "fees", "phase", "finalize_nonce", "inferences", "host_stats", "warm_keys", "latest_nonce", "sealed_acc")
    class InferencesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: InferenceRecordProto
        def __init__(self, key: _Optional[int] = ..., value: _Optional[_Union[InferenceRecordProto, _Mapping]] = ...) -> None: ...
    class HostStatsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: HostStatsProto
        def __init__(self, key: _Optional[int] = ..., value: _Optional[_Union[HostStatsProto, _Mapping]] = ...) -> None: ...
    class WarmKeysEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: str
        def __init__(self, key: _Optional[int] = ..., value: _Optional[str] = ...) -> None: ...
    ESCROW_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_ROOT_AND_PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    BALANCE_FIELD_NUMBER: _ClassVar[int]
    FEES_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    FINALIZE_NONCE_FIELD_NUMBER: _ClassVar[int]
    INFERENCES_FIELD_NUMBER: _ClassVar[int]
    HOST_STATS_FIELD_NUMBER: _ClassVar[int]
    WARM_KEYS_FIELD_NUMBER: _ClassVar[int]
    LATEST_NONCE_FIELD_NUMBER: _ClassVar[int]
    SEALED_ACC_FIELD_NUMBER: _ClassVar[int]
    escrow_id: str
    state_root_and_protocol_version: str
    config: SessionConfigProto
    group: _containers.RepeatedCompositeFieldContainer[SlotAssignmentProto]
    balance: int
    fees: int
    phase: int
    finalize_nonce: int
    inferences: _containers.MessageMap[int, InferenceRecordProto]
    host_stats: _containers.MessageMap[int, HostStatsProto]
    warm_keys: _containers.ScalarMap[int, str]
    latest_nonce: int
    sealed_acc: bytes
    def __init__(self, escrow_id: _Optional[str] = ..., state_root_and_protocol_version: _Optional[str] = ..., config: _Optional[_Union[SessionConfigProto, _Mapping]] = ..., group: _Optional[_Iterable[_Union[SlotAssignmentProto, _Mapping]]] = ..., balance: _Optional[int] = ..., fees: _Optional[int] = ..., phase: _Optional[int] = ..., finalize_nonce: _Optional[int] = ..., inferences: _Optional[_Mapping[int, InferenceRecordProto]] = ..., host_stats: _Optional[_Mapping[int, HostStatsProto]] = ..., warm_keys: _Optional[_Mapping[int, str]] = ..., latest_nonce: _Optional[int] = ..., sealed_acc: _Optional[bytes] = ...) -> None: ...

class StateSnapshotProto(_message.Message):
    __slots__ = ("state", "committed_entries", "sealed_nonces", "host_sync_nonce", "height_sync_floor")
    class CommittedEntriesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: bytes
        def __init__(self, key: _Optional[int] = ..., value: _Optional[bytes] = ...) -> None: ...
    class SealedNoncesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    class HostSyncNonceEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    STATE_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    SEALED_NONCES_FIELD_NUMBER: _ClassVar[int]
    HOST_SYNC_NONCE_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_SYNC_FLOOR_FIELD_NUMBER: _ClassVar[int]
    state: EscrowStateProto
    committed_entries: _containers.ScalarMap[int, bytes]
    sealed_nonces: _containers.ScalarMap[int, int]
    host_sync_nonce: _containers.ScalarMap[int, int]
    height_sync_floor: FloorIndexProto
    def __init__(self, state: _Optional[_Union[EscrowStateProto, _Mapping]] = ..., committed_entries: _Optional[_Mapping[int, bytes]] = ..., sealed_nonces: _Optional[_Mapping[int, int]] = ..., host_sync_nonce: _Optional[_Mapping[int, int]] = ..., height_sync_floor: _Optional[_Union[FloorIndexProto, _Mapping]] = ...) -> None: ...

class FloorIndexProto(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
