/* libvirt-vm-test-util.h: what the VM tests of the libvirt plugin share. */
#pragma once

#include "box-agent-client.h"
#include "box-agent-exec.h"
#include "box-config.h"
#include "box-engine.h"
#include "box-libvirt-private.h"

typedef struct {
  char          *data_dir;
  char          *vm_dir;
  BoxEngine     *engine;
  BoxHypervisor *hv;
} Suite;

extern Suite suite;

#define SANDBOX_A "sb-vmtestaaaaaa"
#define SANDBOX_B "sb-vmtestbbbbbb"

typedef struct {
  gboolean      done;
  GAsyncResult *result;
} Wait;

/* suite: vm_dir from BOX_VM_TEST_DIR (default /var/tmp/box-vm-test), a
 * data directory <vm_dir>/<data_prefix><build key>, an engine, the plugin */
void           suite_init    (const char *data_prefix);
void           set_config    (BoxEngine *engine, const char *key, const char *value);
BoxEngine     *new_engine    (const char *data_dir);
BoxHypervisor *new_plugin    (BoxEngine *engine);
void           stop_plugin   (BoxHypervisor **hv);
void           wait_cb       (GObject *source, GAsyncResult *result, gpointer user_data);
void           wait_for      (Wait *wait);
/* @op with @request, to completion */
gboolean       run_request   (BoxHypervisor *hv, BoxVmOp op, const BoxVmRequest *request,
                              GError **error);
/* @op on @id with the test's request (template base, 2 CPUs, 2048 MiB) */
gboolean       run_op        (BoxHypervisor *hv, BoxVmOp op, const char *id, guint disk_gib,
                              GError **error);
gdouble        run_ok_disk   (BoxHypervisor *hv, BoxVmOp op, const char *id, guint disk_gib);
gdouble        run_ok        (BoxHypervisor *hv, BoxVmOp op, const char *id);
char          *exec_full     (BoxHypervisor *hv, const char *id, int *code,
                              const char *const *argv);
char          *sh            (BoxHypervisor *hv, const char *id, const char *script);
char          *vm_dir_of     (const char *id);
int            compare_double (gconstpointer a, gconstpointer b);
gdouble        median        (GArray *values);
