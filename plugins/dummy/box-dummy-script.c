/* box-dummy-script.c: the `dummy` hypervisor's fault script; see box-dummy-script.h. */
#include "config.h"

#include <string.h>

#include "box-dummy-script.h"

typedef enum {
  RULE_FAIL,
  RULE_DELAY,
  RULE_LOSE,
  RULE_END,
} RuleAction;

typedef struct {
  BoxVmOp     op;           /* BOX_VM_OP_LAST: every operation */
  char       *sandbox_id;   /* NULL: every sandbox */
  RuleAction  action;
  gint64      times;        /* < 0: always */
  gint        code;
  guint       delay_ms;
} Rule;

struct _BoxDummyScript {
  GPtrArray *rules;         /* Rule* */
};

static void
rule_free (Rule *rule)
{
  g_free (rule->sandbox_id);
  g_free (rule);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Rule, rule_free)

BoxDummyScript *
box_dummy_script_new (void)
{
  BoxDummyScript *script = g_new0 (BoxDummyScript, 1);

  script->rules = g_ptr_array_new_with_free_func ((GDestroyNotify) rule_free);
  return script;
}

void
box_dummy_script_free (BoxDummyScript *script)
{
  if (script == NULL)
    return;
  g_ptr_array_unref (script->rules);
  g_free (script);
}

void
box_dummy_script_clear (BoxDummyScript *script)
{
  g_ptr_array_set_size (script->rules, 0);
}

guint
box_dummy_script_count (BoxDummyScript *script)
{
  return script->rules->len;
}

static gboolean
syntax_error (GError **error, const char *rule, const char *what)
{
  g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "script rule \"%s\": %s", rule, what);
  return FALSE;
}

static gboolean
parse_op (const char *word, BoxVmOp *op)
{
  if (g_str_equal (word, "*")) {
    *op = BOX_VM_OP_LAST;
    return TRUE;
  }
  for (guint i = 0; i < BOX_VM_OP_LAST; i++) {
    if (g_str_equal (word, box_vm_op_to_string (i))) {
      *op = i;
      return TRUE;
    }
  }
  return FALSE;
}

static gboolean
parse_code (const char *name, gint *code)
{
  for (gint i = 0; i < BOX_ERROR_LAST; i++) {
    if (g_strcmp0 (name, box_error_code_name (i)) == 0) {
      *code = i;
      return TRUE;
    }
  }
  return FALSE;
}

static gboolean
parse_option (Rule *rule, const char *text, const char *option, GError **error)
{
  const char *eq = strchr (option, '=');
  g_autofree char *key = NULL;
  const char *value;
  guint64 number = 0;

  if (eq == NULL || eq == option || eq[1] == '\0')
    return syntax_error (error, text, "options are key=value");
  key = g_strndup (option, eq - option);
  value = eq + 1;
  if (g_str_equal (key, "sandbox")) {
    g_free (rule->sandbox_id);
    rule->sandbox_id = g_strdup (value);
    return TRUE;
  }
  if (g_str_equal (key, "code"))
    return parse_code (value, &rule->code) || syntax_error (error, text, "unknown error code");
  if (!g_ascii_string_to_unsigned (value, 10, 0, G_MAXINT32, &number, NULL))
    return syntax_error (error, text, "times and ms take a number");
  if (g_str_equal (key, "times")) {
    rule->times = (gint64) number;
    return TRUE;
  }
  if (g_str_equal (key, "ms")) {
    rule->delay_ms = (guint) number;
    return TRUE;
  }
  return syntax_error (error, text, "unknown option");
}

static Rule *
parse_rule (const char *text, GError **error)
{
  g_auto(GStrv) words = g_strsplit_set (text, " \t", -1);
  g_autoptr(Rule) rule = g_new0 (Rule, 1);
  g_autoptr(GPtrArray) parts = g_ptr_array_new ();

  for (guint i = 0; words[i] != NULL; i++) {
    if (words[i][0] != '\0')
      g_ptr_array_add (parts, words[i]);
  }
  rule->times = -1;
  rule->code = BOX_ERROR_INTERNAL;
  if (parts->len < 2) {
    syntax_error (error, text, "expected <op> <action>");
    return NULL;
  }
  if (!parse_op (g_ptr_array_index (parts, 0), &rule->op)) {
    syntax_error (error, text, "unknown operation");
    return NULL;
  }
  if (g_str_equal (g_ptr_array_index (parts, 1), "fail"))
    rule->action = RULE_FAIL;
  else if (g_str_equal (g_ptr_array_index (parts, 1), "delay"))
    rule->action = RULE_DELAY;
  else if (g_str_equal (g_ptr_array_index (parts, 1), "lose"))
    rule->action = RULE_LOSE;
  else if (g_str_equal (g_ptr_array_index (parts, 1), "end"))
    rule->action = RULE_END;
  else {
    syntax_error (error, text, "the action is fail, delay, lose or end");
    return NULL;
  }
  for (guint i = 2; i < parts->len; i++) {
    if (!parse_option (rule, text, g_ptr_array_index (parts, i), error))
      return NULL;
  }
  return g_steal_pointer (&rule);
}

gboolean
box_dummy_script_add (BoxDummyScript *script, const char *text, GError **error)
{
  g_auto(GStrv) lines = g_strsplit_set (text != NULL ? text : "", ";\n", -1);
  g_autoptr(GPtrArray) parsed = g_ptr_array_new_with_free_func ((GDestroyNotify) rule_free);

  for (guint i = 0; lines[i] != NULL; i++) {
    Rule *rule;

    g_strstrip (lines[i]);
    if (lines[i][0] == '\0')
      continue;
    rule = parse_rule (lines[i], error);
    if (rule == NULL)
      return FALSE;
    g_ptr_array_add (parsed, rule);
  }
  while (parsed->len > 0)
    g_ptr_array_add (script->rules, g_ptr_array_steal_index (parsed, 0));
  return TRUE;
}

void
box_dummy_script_match (BoxDummyScript *script, BoxVmOp op, const char *sandbox_id,
                        BoxDummyOutcome *outcome)
{
  memset (outcome, 0, sizeof (*outcome));
  for (guint i = 0; i < script->rules->len; i++) {
    Rule *rule = g_ptr_array_index (script->rules, i);

    if ((rule->op != BOX_VM_OP_LAST && rule->op != op) ||
        (rule->sandbox_id != NULL && g_strcmp0 (rule->sandbox_id, sandbox_id) != 0) ||
        rule->times == 0)
      continue;
    if (rule->times > 0)
      rule->times--;
    switch (rule->action) {
    case RULE_DELAY:
      outcome->delay_ms = MAX (outcome->delay_ms, rule->delay_ms);
      break;
    case RULE_FAIL:
    case RULE_LOSE:
    case RULE_END:
    default:
      if (outcome->fail || outcome->lose || outcome->end)
        break;
      outcome->fail = rule->action == RULE_FAIL;
      outcome->lose = rule->action == RULE_LOSE;
      outcome->end = rule->action == RULE_END;
      outcome->code = rule->code;
      break;
    }
  }
}

static const struct {
  const char        *name;
  BoxHypervisorCaps  flag;
} cap_names[] = {
  { "guest-agent", BOX_HYPERVISOR_CAP_GUEST_AGENT },
  { "memory-snapshots", BOX_HYPERVISOR_CAP_MEMORY_SNAPSHOTS },
  { "checkpoints", BOX_HYPERVISOR_CAP_CHECKPOINTS },
  { "fork", BOX_HYPERVISOR_CAP_FORK },
  { "hot-pause", BOX_HYPERVISOR_CAP_HOT_PAUSE },
  { "images", BOX_HYPERVISOR_CAP_IMAGES },
};

gboolean
box_dummy_caps_parse (const char *text, BoxHypervisorCaps *caps, GError **error)
{
  g_auto(GStrv) names = g_strsplit (text != NULL ? text : "", ",", -1);
  BoxHypervisorCaps flags = BOX_HYPERVISOR_CAP_NONE;

  for (guint i = 0; names[i] != NULL; i++) {
    gboolean known = FALSE;

    g_strstrip (names[i]);
    if (names[i][0] == '\0')
      continue;
    for (guint j = 0; j < G_N_ELEMENTS (cap_names); j++) {
      if (g_str_equal (names[i], cap_names[j].name)) {
        flags |= cap_names[j].flag;
        known = TRUE;
      }
    }
    if (!known) {
      g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "unknown capability \"%s\"", names[i]);
      return FALSE;
    }
  }
  *caps = flags;
  return TRUE;
}
