/*
 * A fake libnvfm for the tests: the real ABI, canned partition tables.
 *
 * Struct layouts, struct versions and return codes follow the Fabric
 * Manager SDK headers nv_fm_types.h / nv_fm_agent.h (see
 * shared/reference/fabric-manager.md); the tables are the FM User Guide
 * default partitions of HGX H100 (ids 0-14) and HGX B200 (ids 1-15).
 *
 * Environment (read at each call):
 *   FAKE_NVFM_TABLE=h100|b200   table served (default h100). H100 reports
 *                               empty uuid/pciBusId, B200 reports pciBusId
 *                               "00000000:00:00.0" as some FM versions do.
 *   FAKE_NVFM_FAIL=call:code[,call:code...]
 *                               that call always returns that code.
 *   FAKE_NVFM_FAIL_ONCE=call:code[,...]
 *                               the first such call of this loaded copy of
 *                               the library returns the code, later calls
 *                               work (a dropped connection).
 *   FAKE_NVFM_HANG=call         that call hangs (FM stuck): it returns
 *                               FM_ST_TIMEOUT after HANG_SECONDS (60), so
 *                               a test that forgets it still ends; with
 *                               FAKE_NVFM_HANG_PIDFILE=path it first
 *                               writes the process id there.
 *   FAKE_NVFM_STATE=path        the active partitions live in this file
 *                               (one '0'/'1' per table entry), shared by
 *                               every process that loads the library, as
 *                               the running FM daemon's state is.
 *
 * State (initialized, connected) lives in the loaded library; the active
 * partitions too unless FAKE_NVFM_STATE names a file. Activation:
 * unknown id -> FM_ST_BADPARAM, already active -> FM_ST_IN_USE (both as
 * documented in nv_fm_agent.h); a GPU already in another active partition
 * -> FM_ST_RESOURCE_USED_IN_ANOTHER_PARTITION (our choice: the header
 * documents no code for it). Deactivating a partition that is not active
 * -> FM_ST_UNINITIALIZED, as nv_fm_agent.h documents.
 *
 * Test hooks: fakeNvfmLastConnect() copies the last successful fmConnect
 * parameters, fakeNvfmConnectCount() counts successful fmConnect calls.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FM_MAX_STR_LENGTH 256
#define FM_UUID_BUFFER_SIZE 80
#define FM_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define FM_MAX_NUM_GPUS 16
#define FM_MAX_FABRIC_PARTITIONS 64
#define MAKE_FM_PARAM_VERSION(type, ver) \
    (unsigned int)(sizeof(type) | ((ver) << 24))

typedef int fmReturn_t;
typedef void *fmHandle_t;
typedef unsigned int fmFabricPartitionId_t;

enum {
    FM_ST_SUCCESS = 0,
    FM_ST_BADPARAM = -1,
    FM_ST_GENERIC_ERROR = -2,
    FM_ST_UNINITIALIZED = -4,
    FM_ST_TIMEOUT = -5,
    FM_ST_VERSION_MISMATCH = -6,
    FM_ST_IN_USE = -7,
    FM_ST_CONNECTION_NOT_VALID = -9,
    FM_ST_RESOURCE_USED_IN_ANOTHER_PARTITION = -24,
};

enum { ADDR_TYPE_INET = 1, ADDR_TYPE_UNIX = 2 };

typedef struct {
    unsigned int version;
    char addressInfo[FM_MAX_STR_LENGTH];
    unsigned int timeoutMs;
    unsigned int addressIsUnixSocket;
    unsigned int addressType;
} fmConnectParams_t;

typedef struct {
    unsigned int physicalId;
    char uuid[FM_UUID_BUFFER_SIZE];
    char pciBusId[FM_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
    unsigned int numNvLinksAvailable;
    unsigned int maxNumNvLinks;
    unsigned int nvlinkLineRateMBps;
} fmFabricPartitionGpuInfo_t;

typedef struct {
    fmFabricPartitionId_t partitionId;
    unsigned int isActive;
    unsigned int numGpus;
    fmFabricPartitionGpuInfo_t gpuInfo[FM_MAX_NUM_GPUS];
} fmFabricPartitionInfo_t;

typedef struct {
    unsigned int version;
    unsigned int numPartitions;
    unsigned int maxNumPartitions;
    fmFabricPartitionInfo_t partitionInfo[FM_MAX_FABRIC_PARTITIONS];
} fmFabricPartitionList_t;

_Static_assert(sizeof(fmConnectParams_t) == 272, "connect params v2");
_Static_assert(sizeof(fmFabricPartitionGpuInfo_t) == 128, "gpu info");
_Static_assert(sizeof(fmFabricPartitionInfo_t) == 2060, "partition");
_Static_assert(sizeof(fmFabricPartitionList_t) == 131852, "list");

/* A partition: its id and member physical ids (0-terminated). */
struct table_entry {
    unsigned int id;
    unsigned int gpus[9];
};

static const struct table_entry h100_table[] = {
    {0, {1, 2, 3, 4, 5, 6, 7, 8}},
    {1, {1, 2, 3, 4}}, {2, {5, 6, 7, 8}},
    {3, {1, 3}}, {4, {2, 4}}, {5, {5, 7}}, {6, {6, 8}},
    {7, {1}}, {8, {2}}, {9, {3}}, {10, {4}},
    {11, {5}}, {12, {6}}, {13, {7}}, {14, {8}},
};

static const struct table_entry b200_table[] = {
    {1, {1, 2, 3, 4, 5, 6, 7, 8}},
    {2, {1, 2, 3, 4}}, {3, {5, 6, 7, 8}},
    {4, {1, 2}}, {5, {3, 4}}, {6, {5, 6}}, {7, {7, 8}},
    {8, {1}}, {9, {2}}, {10, {3}}, {11, {4}},
    {12, {5}}, {13, {6}}, {14, {7}}, {15, {8}},
};

#define TABLE_SIZE 15
#define HANG_SECONDS 60

static int initialized;
static int connected;
static int session_token;      /* its address is the handle */
static int connect_count;
static fmConnectParams_t last_connect;
static int active[TABLE_SIZE];
static char failed_once[8][64]; /* calls whose one failure was served */

/* The code injected for `call` by the variable `name`, or 0. */
static int lookup(const char *name, const char *call)
{
    const char *spec = getenv(name);
    size_t len = strlen(call);

    while (spec && *spec) {
        if (strncmp(spec, call, len) == 0 && spec[len] == ':')
            return atoi(spec + len + 1);
        spec = strchr(spec, ',');
        if (spec)
            spec++;
    }
    return 0;
}

/* FAKE_NVFM_HANG: block in `call` as a stuck FM client does; 1 if so. */
static int hang(const char *call)
{
    const char *name = getenv("FAKE_NVFM_HANG");
    const char *pidfile = getenv("FAKE_NVFM_HANG_PIDFILE");
    FILE *out;
    int left = HANG_SECONDS;

    if (!name || strcmp(name, call) != 0)
        return 0;
    if (pidfile && (out = fopen(pidfile, "w"))) {
        fprintf(out, "%d\n", (int)getpid());
        fclose(out);
    }
    while (left > 0)
        left = sleep(left);
    return 1;
}

/* With FAKE_NVFM_STATE, read the active partitions from the file. */
static void load_state(void)
{
    const char *path = getenv("FAKE_NVFM_STATE");
    char flags[TABLE_SIZE];
    FILE *in;
    int p;

    if (!path || !(in = fopen(path, "r")))
        return;
    if (fread(flags, 1, TABLE_SIZE, in) == TABLE_SIZE)
        for (p = 0; p < TABLE_SIZE; p++)
            active[p] = flags[p] == '1';
    fclose(in);
}

static void save_state(void)
{
    const char *path = getenv("FAKE_NVFM_STATE");
    FILE *out;
    int p;

    if (!path || !(out = fopen(path, "w")))
        return;
    for (p = 0; p < TABLE_SIZE; p++)
        fputc(active[p] ? '1' : '0', out);
    fclose(out);
}

static int injected(const char *call)
{
    int code = lookup("FAKE_NVFM_FAIL", call);
    int i;

    if (hang(call))
        return FM_ST_TIMEOUT;

    if (code)
        return code;
    code = lookup("FAKE_NVFM_FAIL_ONCE", call);
    if (!code)
        return 0;
    for (i = 0; i < 8 && failed_once[i][0]; i++)
        if (strcmp(failed_once[i], call) == 0)
            return 0;
    if (i < 8)
        strncpy(failed_once[i], call, sizeof(failed_once[i]) - 1);
    return code;
}

static const struct table_entry *table(void)
{
    const char *name = getenv("FAKE_NVFM_TABLE");

    if (!name || strcmp(name, "h100") == 0)
        return h100_table;
    if (strcmp(name, "b200") == 0)
        return b200_table;
    return NULL;
}

static int valid(fmHandle_t handle)
{
    return connected && handle == (fmHandle_t)&session_token;
}

fmReturn_t fmLibInit(void)
{
    int code = injected("fmLibInit");

    if (code)
        return code;
    initialized = 1;
    return FM_ST_SUCCESS;
}

fmReturn_t fmLibShutdown(void)
{
    int code = injected("fmLibShutdown");

    if (code)
        return code;
    if (!initialized)
        return FM_ST_UNINITIALIZED;
    initialized = 0;
    connected = 0;
    return FM_ST_SUCCESS;
}

fmReturn_t fmConnect(fmConnectParams_t *params, fmHandle_t *handle)
{
    int code = injected("fmConnect");

    if (code)
        return code;
    if (!initialized)
        return FM_ST_UNINITIALIZED;
    if (!params || !handle)
        return FM_ST_BADPARAM;
    if (params->version != MAKE_FM_PARAM_VERSION(fmConnectParams_t, 2))
        return FM_ST_VERSION_MISMATCH;
    if (params->addressType == ADDR_TYPE_UNIX) {
        if (params->addressIsUnixSocket != 1)
            return FM_ST_BADPARAM;
    } else if (params->addressType == ADDR_TYPE_INET) {
        if (params->addressIsUnixSocket != 0 ||
            !strchr(params->addressInfo, ':'))
            return FM_ST_BADPARAM;
    } else {
        return FM_ST_BADPARAM;
    }
    last_connect = *params;
    connect_count++;
    connected = 1;
    *handle = (fmHandle_t)&session_token;
    return FM_ST_SUCCESS;
}

fmReturn_t fmDisconnect(fmHandle_t handle)
{
    int code = injected("fmDisconnect");

    if (code)
        return code;
    if (!initialized)
        return FM_ST_UNINITIALIZED;
    if (!valid(handle))
        return FM_ST_BADPARAM;
    connected = 0;
    return FM_ST_SUCCESS;
}

fmReturn_t fmGetSupportedFabricPartitions(fmHandle_t handle,
                                          fmFabricPartitionList_t *list)
{
    const struct table_entry *entries = table();
    int code = injected("fmGetSupportedFabricPartitions");
    int b200 = entries == b200_table;
    int p, g;

    if (code)
        return code;
    if (!initialized)
        return FM_ST_UNINITIALIZED;
    if (!valid(handle))
        return FM_ST_CONNECTION_NOT_VALID;
    if (!list || !entries)
        return !list ? FM_ST_BADPARAM : FM_ST_GENERIC_ERROR;
    if (list->version != MAKE_FM_PARAM_VERSION(fmFabricPartitionList_t, 1))
        return FM_ST_VERSION_MISMATCH;
    load_state();
    memset((char *)list + sizeof(list->version), 0,
           sizeof(*list) - sizeof(list->version));
    list->numPartitions = TABLE_SIZE;
    list->maxNumPartitions = FM_MAX_FABRIC_PARTITIONS;
    for (p = 0; p < TABLE_SIZE; p++) {
        fmFabricPartitionInfo_t *info = &list->partitionInfo[p];

        info->partitionId = entries[p].id;
        info->isActive = active[p];
        for (g = 0; entries[p].gpus[g]; g++) {
            fmFabricPartitionGpuInfo_t *gpu = &info->gpuInfo[g];

            gpu->physicalId = entries[p].gpus[g];
            if (b200)
                strcpy(gpu->pciBusId, "00000000:00:00.0");
            gpu->numNvLinksAvailable = 18;
            gpu->maxNumNvLinks = 18;
        }
        info->numGpus = g;
    }
    return FM_ST_SUCCESS;
}

static int find(fmFabricPartitionId_t id)
{
    const struct table_entry *entries = table();
    int p;

    for (p = 0; entries && p < TABLE_SIZE; p++)
        if (entries[p].id == id)
            return p;
    return -1;
}

static int shares_gpu(int a, int b)
{
    const struct table_entry *entries = table();
    int i, j;

    for (i = 0; entries[a].gpus[i]; i++)
        for (j = 0; entries[b].gpus[j]; j++)
            if (entries[a].gpus[i] == entries[b].gpus[j])
                return 1;
    return 0;
}

fmReturn_t fmActivateFabricPartition(fmHandle_t handle,
                                     fmFabricPartitionId_t id)
{
    int code = injected("fmActivateFabricPartition");
    int p = find(id);
    int q;

    if (code)
        return code;
    if (!initialized)
        return FM_ST_UNINITIALIZED;
    if (!valid(handle) || p < 0)
        return FM_ST_BADPARAM;
    load_state();
    if (active[p])
        return FM_ST_IN_USE;
    for (q = 0; q < TABLE_SIZE; q++)
        if (active[q] && shares_gpu(p, q))
            return FM_ST_RESOURCE_USED_IN_ANOTHER_PARTITION;
    active[p] = 1;
    save_state();
    return FM_ST_SUCCESS;
}

fmReturn_t fmDeactivateFabricPartition(fmHandle_t handle,
                                       fmFabricPartitionId_t id)
{
    int code = injected("fmDeactivateFabricPartition");
    int p = find(id);

    if (code)
        return code;
    if (!initialized)
        return FM_ST_UNINITIALIZED;
    if (!valid(handle) || p < 0)
        return FM_ST_BADPARAM;
    load_state();
    if (!active[p])
        return FM_ST_UNINITIALIZED;
    active[p] = 0;
    save_state();
    return FM_ST_SUCCESS;
}

void fakeNvfmLastConnect(fmConnectParams_t *out)
{
    *out = last_connect;
}

int fakeNvfmConnectCount(void)
{
    return connect_count;
}
