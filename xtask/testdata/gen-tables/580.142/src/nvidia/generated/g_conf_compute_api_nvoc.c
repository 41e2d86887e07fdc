/* Trimmed from NVIDIA/open-gpu-kernel-modules 580.142 src/nvidia/generated/g_conf_compute_api_nvoc.c
 * Copyright (c) NVIDIA CORPORATION & AFFILIATES
 * SPDX-License-Identifier: MIT */
        /*methodId=*/   0xcb330101u,
        /*paramSize=*/  sizeof(NV_CONF_COMPUTE_CTRL_CMD_SYSTEM_GET_CAPABILITIES_PARAMS),
        /*func=*/       "confComputeApiCtrlCmdSystemGetCapabilities"
