/* SPDX-License-Identifier: BSD-2-Clause */
/* placeholder: not written yet */
typedef int coffer__placeholder_runtime_proto_c;
