"""File names the readers look for beside a workload file (no reader imported: cheap for run set-up)."""

#: the Alibaba GPU 2023 (openb) node list the pod-list reader reads beside its pod list
ALIBABA_2023_NODES = "openb_node_list_all_node.csv"
