"""The key names Slurm 22.05 accepts, so the parser can tell a key that is read but not modelled
(listed once in a warning) from a typo (an error with a did-you-mean suggestion).

Sources (tag ``slurm-22-05-9-1`` of SchedMD/slurm): ``slurm_conf_options[]`` in
``src/common/read_config.c`` (slurm.conf keys), the ``SchedulerParameters`` names parsed in
``src/plugins/sched/backfill/backfill.c`` (``_load_config``) and ``src/slurmctld/job_scheduler.c``
and slurm.conf(5) of 22.05, and the ``NodeName``/``PartitionName`` attributes of slurm.conf(5).
"""
from __future__ import annotations

import difflib

#: slurm.conf keys (read_config.c ``slurm_conf_options``)
CONF_KEYS = frozenset("""
    AccountingStorageBackupHost AccountingStorageEnforce AccountingStorageExternalHost
    AccountingStorageHost AccountingStorageLoc AccountingStorageParameters AccountingStoragePass
    AccountingStoragePort AccountingStorageTRES AccountingStorageType AccountingStorageUser
    AccountingStoreFlags AccountingStoreJobComment AcctGatherEnergyType AcctGatherFilesystemType
    AcctGatherInfinibandType AcctGatherInterconnectType AcctGatherNodeFreq AcctGatherProfileType
    AllowSpecResourcesUsage AuthAltParameters AuthAltTypes AuthInfo AuthType BackupAddr
    BackupController BatchStartTimeout BcastExclude BcastParameters BurstBufferParameters
    BurstBufferType CliFilterPlugins ClusterName CommunicationParameters CompleteWait
    ControlAddr ControlMachine CoreSpecPlugin CpuFreqDef CpuFreqGovernors CredType CryptoType
    DebugFlags DefCPUPerGPU DefMemPerCPU DefMemPerGPU DefMemPerNode DependencyParameters
    DisableRootJobs DownNodes EioTimeout EnforcePartLimits Epilog EpilogMsgTime EpilogSlurmctld
    ExtSensorsFreq ExtSensorsType FairShareDampeningFactor FastSchedule FederationParameters
    FirstJobId FrontendName GetEnvTimeout GpuFreqDef GresTypes GroupUpdateForce GroupUpdateTime
    HealthCheckInterval HealthCheckNodeState HealthCheckProgram InactiveLimit
    InteractiveStepOptions JobAcctGatherFrequency JobAcctGatherParams JobAcctGatherType
    JobCompHost JobCompLoc JobCompParams JobCompPass JobCompPort JobCompType JobCompUser
    JobContainerType JobCredentialPrivateKey JobCredentialPublicCertificate JobFileAppend
    JobRequeue JobSubmitPlugins KeepAliveTime KillOnBadExit KillWait LaunchParameters LaunchType
    Licenses LogTimeFormat MCSParameters MCSPlugin MailDomain MailProg MaxArraySize MaxDBDMsgs
    MaxJobCount MaxJobId MaxMemPerCPU MaxMemPerNode MaxNodeCount MaxStepCount MaxTasksPerNode
    MessageTimeout MinJobAge MpiDefault MpiParams NodeFeaturesPlugins NodeName NodeSet
    OverTimeLimit PartitionName PlugStackConfig PluginDir PowerParameters PowerPlugin
    PrEpParameters PrEpPlugins PreemptExemptTime PreemptMode PreemptType PriorityCalcPeriod
    PriorityDecayHalfLife PriorityFavorSmall PriorityFlags PriorityMaxAge PriorityParameters
    PrioritySiteFactorParameters PrioritySiteFactorPlugin PriorityType PriorityUsageResetPeriod
    PriorityWeightAge PriorityWeightAssoc PriorityWeightFairshare PriorityWeightJobSize
    PriorityWeightPartition PriorityWeightQOS PriorityWeightTRES PrivateData ProctrackType
    Prolog PrologEpilogTimeout PrologFlags PrologSlurmctld PropagatePrioProcess
    PropagateResourceLimits PropagateResourceLimitsExcept RebootProgram ReconfigFlags
    RequeueExit RequeueExitHold ResumeFailProgram ResumeProgram ResumeRate ResumeTimeout
    ResvEpilog ResvOverRun ResvProlog ReturnToService RoutePlugin SallocDefaultCommand
    SbcastParameters SchedulerAuth SchedulerParameters SchedulerTimeSlice SchedulerType
    ScronParameters SelectType SelectTypeParameters SlurmSchedLogFile SlurmSchedLogLevel
    SlurmUser SlurmctldAddr SlurmctldDebug SlurmctldHost SlurmctldLogFile SlurmctldParameters
    SlurmctldPidFile SlurmctldPlugstack SlurmctldPort SlurmctldPrimaryOffProg
    SlurmctldPrimaryOnProg SlurmctldSyslogDebug SlurmctldTimeout SlurmdDebug SlurmdLogFile
    SlurmdParameters SlurmdPidFile SlurmdPort SlurmdSpoolDir SlurmdSyslogDebug SlurmdTimeout
    SlurmdUser SrunEpilog SrunPortRange SrunProlog StateSaveLocation SuspendExcNodes
    SuspendExcParts SuspendProgram SuspendRate SuspendTime SuspendTimeout SwitchParameters
    SwitchType TCPTimeout TaskEpilog TaskPlugin TaskPluginParam TaskProlog TmpFS TopologyParam
    TopologyPlugin TrackWCKey TreeWidth UnkillableStepProgram UnkillableStepTimeout UsePAM
    VSizeFactor WaitTime
""".split())

#: SchedulerParameters names of Slurm 22.05
SCHED_PARAMS = frozenset("""
    allow_zero_lic assoc_limit_stop batch_sched_delay bb_array_stage_cnt bf_busy_nodes
    bf_continue bf_hetjob_immediate bf_hetjob_prio bf_ignore_newly_avail_nodes bf_interval
    bf_job_part_count_reserve bf_licenses bf_max_job_array_resv bf_max_job_assoc bf_max_job_part
    bf_max_job_start bf_max_job_test bf_max_job_user bf_max_job_user_part bf_max_time
    bf_min_age_reserve bf_min_prio_reserve bf_node_space_size bf_one_resv_per_job bf_resolution
    bf_running_job_reserve bf_window bf_yield_interval bf_yield_sleep build_queue_timeout
    correspond_after_task_cnt default_queue_depth defer delay_boot disable_hetjob_steps
    disable_job_shrink disable_user_top enable_hetjob_steps enable_user_top extra_constraints
    ignore_numa ignore_prefer_validation kill_invalid_depend max_array_tasks max_depend_depth
    max_rpc_cnt max_rpc_count max_sched_time max_script_size max_switch_wait
    no_backup_scheduling no_env_cache nohold_on_prolog_fail pack_serial_at_end
    partition_job_depth permit_job_expansion preempt_reorder_count preempt_strict_order
    preempt_youngest_first reduce_completing_frag requeue_setup_env_fail salloc_wait_nodes
    sbatch_wait_nodes sched_interval sched_max_job_start sched_min_interval spec_cores_first
    step_retry_count step_retry_time whole_hetjob
""".split())

#: SchedulerParameters that only act on wall-clock time spent inside a scheduling pass (Slurm
#: 22.05 ``src/plugins/sched/backfill/backfill.c``: ``bf_max_time`` ends a cycle after that many
#: seconds since it began, ``bf_yield_interval``/``bf_yield_sleep`` release the locks after that
#: many microseconds of work, ``max_rpc_cnt`` yields when RPCs queue up, and ``bf_continue`` only
#: decides, in ``_yield_locks``, whether a cycle whose job or node state changed during a yield goes
#: on or stops; ``src/slurmctld/job_scheduler.c``: ``max_sched_time`` and ``build_queue_timeout``
#: cut the main pass / queue build after that much wall-clock time). The twin's passes take no
#: simulated time and no event is applied during one, so none of them can change a decision.
WALL_CLOCK_PARAMS = frozenset("""
    bf_continue bf_max_time bf_yield_interval bf_yield_sleep build_queue_timeout max_rpc_cnt
    max_rpc_count max_sched_time
""".split())

#: NodeName line attributes
NODE_ATTRS = frozenset("""
    NodeName NodeHostname NodeAddr BcastAddr Boards CoreSpecCount CoresPerSocket CpuBind CPUs
    CPUSpecList Features Gres MemSpecLimit Port Procs RealMemory Reason Sockets SocketsPerBoard
    State ThreadsPerCore TmpDisk Weight
""".split())

#: PartitionName line attributes
PARTITION_ATTRS = frozenset("""
    AllocNodes AllowAccounts AllowGroups AllowQos Alternate CpuBind Default DefaultTime
    DefCpuPerGPU DefMemPerCPU DefMemPerGPU DefMemPerNode DenyAccounts DenyQos DisableRootJobs
    ExclusiveUser GraceTime Hidden LLN MaxCPUsPerNode MaxMemPerCPU MaxMemPerNode MaxNodes
    MaxTime MinNodes Nodes OverSubscribe OverTimeLimit PowerDownOnIdle PreemptMode Priority
    PriorityJobFactor PriorityTier QOS ReqResv ResumeTimeout RootOnly SelectTypeParameters
    Shared State SuspendTime SuspendTimeout TRESBillingWeights
""".split())


def suggest(word: str, known: frozenset) -> str:
    """`` (did you mean X?)`` for the closest known name, or an empty string."""
    lower = {k.lower(): k for k in known}
    m = difflib.get_close_matches(word.lower(), list(lower), n=1, cutoff=0.6)
    return f" (did you mean {lower[m[0]]}?)" if m else ""


def is_known(word: str, known: frozenset) -> bool:
    """Case-insensitive membership (slurm.conf keys are case-insensitive)."""
    w = word.lower()
    return any(k.lower() == w for k in known)
