/* status.c -- names for pa_status_t values.
 * A table rather than strerror-style formatting: the strings are static so
 * callers (and Python exceptions) can quote them without owning memory. */
#include "pyarena.h"

const char *pa_status_string(pa_status_t status) {
    switch (status) {
    case PA_OK: return "ok";
    case PA_ERR_INVALID: return "invalid argument";
    case PA_ERR_ALIGN: return "alignment is not a supported power of two";
    case PA_ERR_OVERFLOW: return "size overflow";
    case PA_ERR_NOMEM: return "out of memory";
    case PA_ERR_STATE: return "operation not valid in the current state";
    case PA_ERR_DOUBLE_FREE: return "double free";
    case PA_ERR_FOREIGN: return "pointer not owned by this allocator";
    case PA_ERR_INFEASIBLE: return "infeasible within the given capacity";
    case PA_ERR_TIMEOUT: return "time limit reached";
    }
    return "unknown status";
}
