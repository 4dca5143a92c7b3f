# Atoll wire schema. Append-only: ordinals are never renumbered, fields are only added,
# retired fields are renamed `obsoleteX` and left in place. The file id is fixed.
@0xdc88b2ee39052f2d;

$import "/capnp/c++.capnp".namespace("atl::schema");

# Every inter-process message is one Envelope frame, followed by one raw frame per entry
# of `tensors` (the bytes are never copied into the Cap'n Proto message).
struct Envelope {
  version   @0 :UInt16;   # wire protocol version; see runtime/transport/wire.hpp
  clusterId @1 :Text;     # empty only on Hello and ControlRequest (bootstrap)
  sender    @2 :Text;     # actor id, e.g. "registry", "coord/0", "worker/1.0"
  receiver  @3 :Text;
  epoch     @4 :UInt64;   # membership epoch the sender acted in
  seq       @5 :UInt64;   # per-sender sequence number, starts at 1
  tensors   @6 :List(TensorDesc);

  union {  # the payload
    hello           @7  :Hello;
    welcome         @8  :Welcome;
    heartbeat       @9  :Heartbeat;
    obsoleteHeartbeatAck @10 :ObsoleteHeartbeatAck;  # never sent; kept for the ordinal
    stateRequest    @11 :StateRequest;
    fragmentState   @12 :FragmentState;
    contribution    @13 :Contribution;
    roundResult     @14 :RoundResult;
    roundAck        @15 :RoundAck;
    progress        @16 :Progress;
    evalReport      @17 :EvalReport;
    workerDone      @18 :WorkerDone;
    refusal         @19 :Refusal;
    controlRequest  @20 :ControlRequest;
    controlReply    @21 :ControlReply;
    shutdown        @22 :Shutdown;
    commitRequest   @23 :CommitRequest;
    commitAck       @24 :CommitAck;
    loadRequest     @25 :LoadRequest;
    loadReply       @26 :LoadReply;
    placeCoordinator  @27 :PlaceCoordinator;
    membership        @28 :Membership;
    membershipRequest @29 :MembershipRequest;
    roundReport       @30 :RoundReport;
    goodbye           @31 :Goodbye;
    placeKeeper       @32 :PlaceKeeper;
    chunkRequest      @33 :ChunkRequest;
    chunkReply        @34 :ChunkReply;
    peerTable         @35 :PeerTable;
    roundProgress     @36 :RoundProgress;
    stateHeld         @37 :StateHeld;
    leaveRequest      @38 :LeaveRequest;
    keeperReady       @39 :KeeperReady;
    heartbeatRequest  @40 :HeartbeatRequest;
    innerStateRequest @41 :InnerStateRequest;
    innerStateReply   @42 :InnerStateReply;
    peerTableRequest  @43 :PeerTableRequest;
    dataLeaseRequest  @44 :DataLeaseRequest;
    dataLease         @45 :DataLease;
    dataTie           @46 :DataTie;
    roundReportAck    @47 :RoundReportAck;
    dropKeeper        @48 :DropKeeper;
  }
}

enum DType { float32 @0; bfloat16 @1; float16 @2; int8 @3; uint8 @4; }
enum Codec { raw @0; }

struct TensorDesc {
  dtype    @0 :DType;
  codec    @1 :Codec;
  shape    @2 :List(UInt64);
  byteSize @3 :UInt64;   # exact size of the raw frame
  checksum @4 :UInt64;   # runtime/core/digest.hpp digest64 of the raw frame
}

# node agent -> registry
struct Hello {
  nodeId   @0 :UInt32;        # 0 for a new node
  devices  @1 :List(Text);    # "cpu", "cuda:0", ...
  hostname @2 :Text;
  pid      @3 :UInt32;
  canKeep  @4 :Bool;          # has a data dir (`atoll join --run-dir`): may host a keeper replica
  dataEndpoint @5 :Text;      # where peers send it tensors (`atoll join --listen`); empty: relayed by the head
  modelDigest @6 :Text;       # digest of the node's copy of model.file (a TorchScript run); empty: none
  batchJob @7 :Text;          # the scheduler's job it runs in, e.g. "slurm 1234.0"; empty: none
  modelSignature @8 :Text;    # run.example = external: the node's parameters, "name dtype shape group"
                              # a line (runtime/core/model_signature.hpp); empty: a built-in or file model
}

# registry -> node agent. The run's configuration travels here so that every
# process trains with the head's settings.
struct Welcome {
  nodeId    @0 :UInt32;
  workers   @1 :List(WorkerSlot);
  configToml @2 :Text;
  worldSize @3 :UInt32;       # number of workers the run trains with
  seeded    @4 :Bool;         # no longer set or read: rank 0 sends its parameters only
                              # when a coordinator's StateHeld asks for them
}
struct WorkerSlot {
  id     @0 :Text;
  rank   @1 :UInt32;
  device @2 :Text;
}

# node agent -> registry, every cluster.heartbeat_ms. Carries the node's refusal
# counters (index = errc code, runtime/core/error.hpp) so `atollctl status` shows them, and
# the version of the PeerTable it holds: the registry answers a node whose table is not the
# one published with a version check (runtime/transport/route_delta.hpp), and a node that is
# current with nothing. 0 and 0 (a node from before them) always get one.
struct Heartbeat {
  nodeId           @0 :UInt32;
  refused          @1 :List(UInt64);
  handshakesFailed @2 :UInt64;
  workerRestarts   @3 :UInt64;   # worker restarts by the node's supervisor since it started
  routesEpoch      @4 :UInt64;   # the epoch of the PeerTable it holds
  routesDigest     @5 :UInt64;   # its routes_digest
}
struct ObsoleteHeartbeatAck { leaseMs @0 :UInt32; }  # retired: never sent

# registry -> node agent: the node's connection to the head closed; a live node answers
# with a Heartbeat at once, or is declared dead after cluster.confirm_ms
# (actors/decisions/liveness.hpp).
struct HeartbeatRequest { nodeId @0 :UInt32; }

# worker -> coordinator: "give me the newest committed fragment". Rank 0's carries its own
# initial fragment (one tensor) so that a fresh run can be seeded from it, until it has
# a state or the coordinator says it needs none (StateHeld). `heldDigest`: digest64 of the
# fragment's values the worker holds now (0: none); when it is the committed state's, the
# FragmentState comes as a header, and a worker still holding those bytes fetches nothing
# (workers start from the same seed, so a fresh run's first state is not sent to them).
# `skipsRound` (0: none): the worker is past that round's sync point, holding an older
# round (a joiner whose other slice of the fragment was a round ahead): it will contribute
# to none of the rounds up to it. The coordinator leaves it out of the open round if that
# is one of them, and answers with that round's state or a newer one.
struct StateRequest {
  fragment   @0 :UInt32;
  heldDigest @1 :UInt64;
  skipsRound @2 :UInt64;
}
# coordinator -> worker: your StateRequest is held until a round that includes you opens
# (repeat it meanwhile, for a lost message). `seedHeld`: the fragment is seeded or the
# coordinator holds parameters to seed it from; repeats need not carry any.
struct StateHeld {
  fragment @0 :UInt32;
  seedHeld @1 :Bool;
}
# coordinator -> worker: theta_global of the fragment at `round`: one tensor, or, for a
# fragment larger than diloco.state_chunk_values or one whose bytes the worker said it
# holds (StateRequest.heldDigest), none: the worker then uses what it holds if its digest
# is `digest`, or fetches the `count` values in chunks from `keepers` (each has the round)
# and checks them against `digest`.
struct FragmentState {
  fragment @0 :UInt32;
  round    @1 :UInt64;
  count    @2 :UInt64;         # values of theta (chunked transfer)
  digest   @3 :UInt64;         # digest64 of their fp32 bytes (chunked transfer)
  keepers  @4 :List(Text);     # where to fetch them, in order of preference
  donors   @5 :List(Text);     # live workers that may give a joiner their inner-optimizer state
}
# worker (a joiner) -> worker (a donor): values [offset, offset + count) of the donor's
# inner-optimizer state (AdamW's moments). snapshot 0 asks for a new snapshot, taken at the
# donor's step boundary; later chunks name the snapshot its first reply gave.
struct InnerStateRequest {
  snapshot @0 :UInt64;
  offset   @1 :UInt64;
  count    @2 :UInt64;
}
# donor -> joiner: the values asked for (one Float32 tensor) with the snapshot's header, or
# found = false (no such snapshot, nothing trained yet, or a replica without such state).
struct InnerStateReply {
  snapshot @0 :UInt64;
  found    @1 :Bool;
  adamStep @2 :Int64;          # AdamW's step count (its bias correction)
  count    @3 :UInt64;         # values in the whole snapshot
  digest   @4 :UInt64;         # digest64 of their fp32 bytes
  offset   @5 :UInt64;
}
# worker -> keeper: values [offset, offset + count) of theta of fragment `fragment` at `round`.
struct ChunkRequest {
  fragment @0 :UInt32;
  round    @1 :UInt64;
  offset   @2 :UInt64;
  count    @3 :UInt64;
}
# keeper -> worker: the values asked for (one Float32 tensor), or found = false if this
# keeper does not hold that round.
struct ChunkReply {
  fragment @0 :UInt32;
  round    @1 :UInt64;
  offset   @2 :UInt64;
  found    @3 :Bool;
}

# worker -> coordinator: pseudo-gradient theta_global - theta_local (DiLoCo) or the
# gradient of one step (ddp mode). Tensors: the encoded payload (UInt8 bytes; Float32 for
# fp32), then for int8 and fp4 the Float32 scales, one per `chunk` values.
struct Contribution {
  fragment @0 :UInt32;
  round    @1 :UInt64;     # the round being closed by this contribution
  weight   @2 :Float32;
  step     @3 :UInt64;     # worker's inner step when it contributed
  codec    @4 :PseudoGradientCodec;
  chunk    @5 :UInt32;     # values per scale (int8, fp4)
  count    @6 :UInt64;     # values encoded
  # run.data_cursor: the positions of the run's data this contribution trained on (the
  # coordinator hands them to the registry in the RoundReport that takes it)
  data     @7 :List(DataPiece);
}
enum PseudoGradientCodec { fp32 @0; bf16 @1; fp16 @2; int8 @3; fp4e2m1 @4; }
# coordinator -> participants: new theta_global (one tensor), digest of theta_global.
# With a low-bit diloco.codec the tensors are instead the round's update of
# theta_global (isUpdate), encoded as a contribution is: a participant adds the decoded
# update to its copy of the previous theta_global, which must then have `digest`.
# Early results (diloco.early_results): the result goes out `provisional` while the keepers
# write the round (once each said CommitAck.writing), and the participant holds it
# unapplied; once every keeper acknowledged the round, a `confirms` result (no tensors,
# the same round and digest) lets it apply what it holds.
struct RoundResult {
  fragment    @0 :UInt32;
  round       @1 :UInt64;
  digest      @2 :UInt64;
  isUpdate    @3 :Bool;
  codec       @4 :PseudoGradientCodec;
  chunk       @5 :UInt32;  # values per scale (int8, fp4)
  count       @6 :UInt64;  # values encoded
  provisional @7 :Bool;    # not committed yet: hold it, do not apply it
  confirms    @8 :Bool;    # committed: apply the provisional result of this round and digest
}
# worker -> registry: the round of fragment `fragment` it now holds, and the digest of its
# theta_global copy (the registry's views show them).
struct RoundAck {
  fragment @0 :UInt32;
  round    @1 :UInt64;
  digest   @2 :UInt64;
  adopted  @3 :Bool;       # got by state transfer, not by merging a result: not taking part
  sinceContributed @4 :Float64;  # seconds from handing this round's contribution to the
                                 # transport to this ack, on the worker's clock; 0: none
}

struct Progress {
  step          @0 :UInt64;
  loss          @1 :Float32;
  tokensPerSec  @2 :Float32;
  bytesSent     @3 :UInt64;
  bytesReceived @4 :UInt64;
  waitSeconds   @5 :Float32;  # time blocked on outer results so far
  threadLayout  @6 :Text;     # a CPU worker's "TxB" (LibTorch x BLAS threads), "trying TxB" during its trial; empty on a GPU
}
struct EvalReport {
  step    @0 :UInt64;
  valLoss @1 :Float32;
}
struct WorkerDone {
  steps         @0 :UInt64;
  finalLoss     @1 :Float32;
  valLoss       @2 :Float32;
  tokensPerSec  @3 :Float32;
  bytesSent     @4 :UInt64;
  bytesReceived @5 :UInt64;
  wallSeconds   @6 :Float32;
  waitSeconds   @7 :Float32;  # time blocked on outer results
  lastAcks      @8 :List(RoundAck);  # the last RoundAck of each fragment, again: a head that
                                     # took over while the worker finished never heard them
}

# Typed refusal of a message; `code` is an atl::errc value (runtime/core/error.hpp).
struct Refusal {
  code       @0 :UInt16;
  message    @1 :Text;
  refusedSeq @2 :UInt64;
}

struct ControlRequest { command @0 :Text; argument @1 :Text; }
struct ControlReply { ok @0 :Bool; json @1 :Text; }
struct Shutdown { reason @0 :Text; }

# coordinator -> keeper: commit (theta_global, momentum) of a round. Two tensors.
# coordinator -> keeper. Round 0 (the seed) and anything not `logged`: the tensors are
# theta_global and momentum, and the result codec's residual when there is one: the full
# state (also what a keeper that answered `behind` is sent). A `logged` request is the round log's record
# (storage/round_record.hpp): the round's inputs, each one's tensors in order (its payload,
# then the fp32 scales for int8 and fp4), or one fp32 input, the round's average
# (`averaged`); the outer rule; and the digest of the theta_global the round reaches.
struct CommitRequest {
  fragment    @0 :UInt32;
  round       @1 :UInt64;
  logged      @2 :Bool;
  thetaDigest @3 :UInt64;
  count       @4 :UInt64;   # values in the fragment
  outerLr     @5 :Float32;
  outerMomentum @6 :Float32;
  resultCodec @7 :PseudoGradientCodec;
  resultChunk @8 :UInt32;
  averaged    @9 :Bool;
  inputs      @10 :List(RoundInput);
  published   @11 :Bool;   # the record is the change the round published (one input, the result codec)
}
struct RoundInput {
  worker @0 :Text;
  weight @1 :Float32;
  codec  @2 :PseudoGradientCodec;
  chunk  @3 :UInt32;
}
# `writing`: not an acknowledgement but a notice that the whole request is in and being
# written (the coordinator's link is free for the round's early results).
struct CommitAck {
  fragment @0 :UInt32;
  round    @1 :UInt64;
  digest   @2 :UInt64;
  ok       @3 :Bool;
  error    @4 :Text;
  writing  @5 :Bool;
  behind   @6 :Bool;   # refused: this keeper does not hold the round before; send the full state
}
# coordinator -> keeper: newest committed state of a fragment.
struct LoadRequest { fragment @0 :UInt32; }
# keeper -> coordinator: `found` with the tensors theta_global and momentum, and a third,
# the result codec's residual, when it is not all zeros; or none.
struct LoadReply {
  fragment @0 :UInt32;
  found    @1 :Bool;
  round    @2 :UInt64;
}

# registry -> node agent: run the coordinator of a fragment in your process.
struct PlaceCoordinator { fragment @0 :UInt32; }
# registry -> node agent: run a keeper replica (`keeper`, e.g. "keeper/1") in your process;
# it catches up from `source` and then takes every commit. Sent again every tick: a node
# already hosting it has the keeper answer KeeperReady once it has caught up.
struct PlaceKeeper {
  keeper @0 :Text;
  source @1 :Text;
  units  @2 :List(UInt32);  # the sync units its keeper group keeps; empty: every unit
}
# registry -> node agent: stop hosting keeper replica `keeper` (the registry placed it
# elsewhere; the node stays). Its store stays on disk. Sent a few ticks over; a node that
# does not host it ignores it.
struct DropKeeper { keeper @0 :Text; }
# replica keeper -> registry: the newest round it holds of each fragment (a hand-over's
# new replica reports it; the leaving node may go once it holds every released round).
# The keeper is the envelope's sender.
struct KeeperReady {
  rounds @0 :List(UInt64);  # at fragment F: its newest round
  held   @1 :List(Bool);    # at fragment F: whether it holds any round of F
}
# registry -> coordinators: the workers of the current epoch (sorted ids).
struct Membership {
  epoch   @0 :UInt64;
  workers @1 :List(Text);
  quorum  @2 :UInt32;   # participants a round needs; 0: the coordinator's run.min_workers
  keepers @3 :List(Text);  # every one must acknowledge a commit; empty: the head's keeper
  # A delta (actors/shared/membership_delta.hpp): what changed since the Membership of epoch
  # `baseEpoch` the registry published before. `workers` holds the workers added,
  # `removedWorkers` those gone; quorum and keepers are whole. `digest` is the whole
  # Membership's after it: a coordinator that holds another base, or reaches another digest,
  # asks for the whole (MembershipRequest). A delta with nothing in it is the tick's version
  # check.
  delta          @4 :Bool;
  baseEpoch      @5 :UInt64;
  removedWorkers @6 :List(Text);
  digest         @7 :UInt64;
  # Keeper groups (unit u is kept by group u mod G): `keepers` lists each group's in turn,
  # this many for each. Empty: one group, every keeper listed.
  keeperGroups   @8 :List(UInt32);
}
# coordinator -> registry: send me the current Membership (on start, or when its deltas
# left a gap).
struct MembershipRequest { fragment @0 :UInt32; }
# coordinator -> registry: a round was committed and released.
struct RoundReport {
  fragment     @0 :UInt32;
  round        @1 :UInt64;
  epoch        @2 :UInt64;
  digest       @3 :UInt64;   # of the released values
  participants @4 :List(Text);
  durationS    @5 :Float32;  # first contribution to release
  bytes        @6 :UInt64;   # contribution bytes received in the round
  sinceLastContributionS @7 :Float32;  # last contribution's arrival to release: decode, average, commit, encode
  weights      @8 :List(Float32);  # each participant's weight in the average (diloco.weighting), in order
  lateWorkers  @9 :List(Text);     # late work folded in: the round before closed without these workers
  lateWeights  @10 :List(Float32); # their weights as averaged (discounted: round_tracker::late_discount)
  ties         @11 :List(ReportedTie); # the data pieces of the contributions this round took
}
# A contribution's data pieces as its RoundReport carries them: `round` is the one it was
# contributed to (the report's own, or the one before for late work).
struct ReportedTie {
  worker @0 :Text;
  round  @1 :UInt64;
  pieces @2 :List(DataPiece);
}
# registry -> coordinator: every RoundReport of the fragment up to `round` is applied; the
# coordinator sends the ones after it again until they are (their ties commit data).
struct RoundReportAck {
  fragment @0 :UInt32;
  round    @1 :UInt64;
}

# coordinator -> registry, when it changed and otherwise every 2 s: where its round is, for
# `atollctl explain`, and the Membership it holds. A coordinator that stops sending is
# itself part of the answer.
struct RoundProgress {
  fragment     @0 :UInt32;
  round        @1 :UInt64;        # collecting: the open round; committing: the one being committed
  phase        @2 :Text;          # unseeded | ready | collecting | committing
  participants @3 :List(Text);    # collecting: who the round waits for
  contributors @4 :List(Text);    # collecting: who has contributed
  phaseForS    @5 :Float32;       # seconds since the phase, round or contributor count last changed
  openForS     @6 :Float32;       # collecting: seconds since the first contribution (0 before it)
  keepers      @7 :List(Text);    # committing: every keeper that must acknowledge
  acked        @8 :List(Text);    # committing: those that have
  # The Membership it holds (epoch and digest, actors/shared/membership_delta.hpp): the
  # registry sends a version check only to a coordinator that names another one.
  membershipEpoch  @9 :UInt64;
  membershipDigest @10 :UInt64;
  # The round's size, whatever the lists name: `participants` then holds only those that have
  # not contributed, and each list at most 256 names (a round of ten thousand would be 640 KB).
  # Both 0 (a coordinator from before them): the lists are whole and these are their sizes.
  participantCount @11 :UInt32;
  contributorCount @12 :UInt32;
}

# node agent -> registry, as the node leaves (atoll leave, SIGTERM, atoll down): its
# workers and coordinators have stopped; no round should wait for them.
struct Goodbye {
  nodeId @0 :UInt32;
  reason @1 :Text;
}
# node agent -> registry, on SIGTERM while it hosts a keeper replica: take me out as
# `atoll leave` does; the registry hands the replica over, then sends Shutdown.
struct LeaveRequest {
  nodeId @0 :UInt32;
  reason @1 :Text;
}

# registry -> node agents, on every change and every tick: where tensors go directly.
# A node absent from `nodes` or with an empty endpoint is reached through the head.
struct PeerTable {
  epoch        @0 :UInt64;
  nodes        @1 :List(PeerNode);
  coordinators @2 :List(Text);   # host node of coord/F at index F ("node/N"; empty: not placed)
  obsoleteReplicaKeeper @3 :Text;        # never sent since `keepers`; kept for the ordinal
  obsoleteSecondReplicaKeeper @4 :Text;  # never sent since `keepers`; kept for the ordinal
  keepers      @5 :List(PlacedKeeper);   # the replica keepers placed on nodes
  # A delta (runtime/transport/route_delta.hpp): what changed since the table of epoch
  # `baseEpoch` the registry sent before. `nodes` holds the nodes added or changed,
  # `removedNodes` those gone; `coordinators` and `keepers` are every placement when
  # `placementsChanged`, else empty and unchanged. `digest` is the whole table's after it:
  # a node that holds another base, or reaches another digest, asks for the whole table
  # (PeerTableRequest). A delta with nothing in it is the registry's version check each tick.
  delta             @6 :Bool;
  baseEpoch         @7 :UInt64;
  removedNodes      @8 :List(UInt32);
  placementsChanged @9 :Bool;
  digest            @10 :UInt64;
}
# node -> registry: "send me the whole PeerTable" (its deltas left a gap).
struct PeerTableRequest { nodeId @0 :UInt32; }
struct PlacedKeeper {
  keeper @0 :Text;  # "keeper/N"
  host   @1 :Text;  # "node/N"
}
struct PeerNode {
  nodeId    @0 :UInt32;
  endpoint  @1 :Text;   # its data endpoint; empty: relayed
  publicKey @2 :Text;   # Z85 CURVE key it authenticated with; empty without CURVE
}

# The run's data cursor (docs/design.md §1, "Every sample once"; actors/decisions/data_cursor.hpp).
# worker -> registry: lease me the next chunk of the run's data. `units` and `chunk` are the
# worker's view of the data; the first request sets the run's, and a worker whose view
# differs is refused (a different data file, or another batch or sync interval).
struct DataLeaseRequest {
  units @0 :UInt64;   # N: the data's units (windows of a token file, records of a dataset)
  chunk @1 :UInt64;   # C: units one lease hands out
}
# registry -> worker: positions [begin, end) of epoch `epoch`'s order, the chunk `index`;
# the unit at a position is unit_at(seed, epoch, position, units). `done`: every epoch of
# the run is leased, nothing more comes.
struct DataLease {
  epoch @0 :UInt64;
  index @1 :UInt64;
  begin @2 :UInt64;
  end   @3 :UInt64;
  seed  @4 :UInt64;
  done  @5 :Bool;
}
# user's loop -> registry, beside its contribution to (fragment, round): the positions of
# its chunks that contribution trained on. Built-in workers put them in the Contribution.
struct DataTie {
  fragment @0 :UInt32;
  round    @1 :UInt64;
  pieces   @2 :List(DataPiece);
}
struct DataPiece {
  epoch @0 :UInt64;
  index @1 :UInt64;   # the chunk
  begin @2 :UInt64;   # positions [begin, end) of the epoch's order, inside the chunk
  end   @3 :UInt64;
}
