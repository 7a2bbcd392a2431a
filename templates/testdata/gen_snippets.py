"""Writes snippets.jsonl: small templates exercising jinja2 semantics, each
with the result jinja2 (configured as transformers configures it) gives.

    python3 templates/testdata/gen_snippets.py

Each line: {"src", "vars", "expected"} or {"src", "vars", "expected_error"}.
"""
import json
import os
import sys

sys.dont_write_bytecode = True

sys.path.insert(0, os.path.dirname(__file__))
from jinjaref import render  # noqa: E402

MSGS = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi there"},
    {"role": "assistant", "content": "Hello!", "tool_calls": [{"id": "abc123DEF", "type": "function", "function": {"name": "f", "arguments": {"x": 1.0, "y": [1, 2]}}}]},
    {"role": "tool", "content": "42"},
]
D = {"b": 1, "a": 2, "items": "key named items", "nested": {"z": None, "y": True, "x": 1.5}}

S = []  # (src, vars)


def add(src, **vars):
    S.append((src, vars))


# --- output conversion / printing -----------------------------------------
for v in [None, True, False, 0, -3, 12345678901234567890, 1.0, 0.1, 1e16, 1e-5, 1.5e-7, 123456789.123, -0.0, 2.5e300,
          "x", "", [1, "a", None, 2.0], [], {"a": 1, "b": [True, None]}, {}, ["it's", 'say "hi"', "both ' \"", "back\\slash", "nl\n", "tab\t", "\x01", "é", "\u2028"]]:
    add("{{ v }}", v=v)
add("{{ (1, 2) }}|{{ (1,) }}|{{ () }}|{{ 1, 2 }}")
add("{{ undefined_thing }}|{{ x.y }}", x={})
add("{{ none }}{{ None }}{{ true }}{{ True }}{{ false }}")
add("{{ 1 == 1.0 }} {{ 1 is sameas 1 }} {{ [1] == [1.0] }} {{ {'a':1} == {'a':1.0} }}")
add("{{ 'a' ~ 1 ~ none ~ [1] ~ x }}")
add("{{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}")
add("{{ 2 ** 100 }} {{ 9223372036854775807 + 1 }} {{ -9223372036854775808 - 1 }} {{ 3 * 'ab' }} {{ [1] * 2 }} {{ 'ab' * 0 }}")
add("{{ 1 + 2.5 }} {{ True + 1 }} {{ 10 / 4 }} {{ 1e3 }} {{ 1_000 }} {{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 1.5e3 }}")
add("{{ -2 ** 2 }} {{ 2 ** 3 ** 2 }} {{ not 1 == 2 }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 if 0 else 2 }} {{ (1 if 0 else 2) + 1 }}")
add("{{ 'x' if false }}|{{ ('a' if true else 'b') ~ 'c' }}|{{ [1 if true else 2, 3] }}")
add("{{ 1 / 0 }}")
add("{{ 1 // 0 }}")
add("{{ 1 % 0 }}")
add("{{ 1.0 / 0 }}")
add("{{ 'a' + 1 }}")
add("{{ 1 + 'a' }}")
add("{{ [1] + 'a' }}")
add("{{ (1,) + [2] }}")
add("{{ none + 1 }}")
add("{{ x + 1 }}")
add("[{{ '%s' % x }}][{{ '%s|%s' % (x, 1) }}]")
add("{{ '%d' % x }}")
add("{{ x % 2 }}")
add("{{ 2 * x }}")
add("{{ [1] * x }}")
add("{{ -x }}")
add("{{ x ~ 'a' }}|{{ x == x }}|{{ x != 1 }}|{{ x is none }}|{{ not x }}")
add("{{ 1 - none }}")
add("{{ 'abc' * -1 }}|{{ [1, 2] * 0 }}|{{ True * 'ab' }}")
add("{{ 'a' + x }}")
add("{{ {} + {} }}")
add("{{ 'a' - 'b' }}")
add("{{ -'a' }}")
add("{{ 'a' < 1 }}")
add("{{ [1,2] < [1,3] }} {{ (1,'a') < (1,'b') }} {{ 'abc' < 'abd' }} {{ 'B' < 'a' }}")
add("{{ x < 1 }}")
add("{{ 'a' * 'b' }}")
add("{{ 'a' * 1.5 }}")
add("{{ 'ab' in 'xaby' }} {{ 1 in [1,2] }} {{ 'a' in {'a':1} }} {{ 3 not in [1,2] }} {{ 'x' in undefined_name }}")
add("{{ 1 in 'abc' }}")
add("{{ 1 in none }}")
add("{{ [1] in {'a': 1} }}")
add("{{ 1 in 5 }}")

# --- literals --------------------------------------------------------------
add(r"""{{ 'a\nb' }}|{{ "q\"q" }}|{{ 'q\'q' }}|{{ '\t|\\|\x41|\u00e9|\U0001F600|\101|\d' }}|{{ 'a' 'b' "c" }}""")
add("{{ {'a': 1, 'b': {'c': [1, 2, {'d': none}]}} }}")
add("{{ {1: 'a', 1.0: 'b', true: 'c'} }}")
add("{{ [1, 2, 3,] }}|{{ {'a': 1,} }}")
add("{{ 'é'|length }} {{ 'héllo'[1] }} {{ 'héllo'[-1] }} {{ 'héllo'[1:3] }} {{ 'héllo'[::-1] }} {{ 'abcdef'[::2] }} {{ 'abcdef'[-2:] }} {{ 'abc'[5:] }}")
add("{{ [1,2,3,4][1:] }} {{ [1,2,3,4][:-1] }} {{ [1,2,3,4][::-1] }} {{ [1,2,3,4][::2] }} {{ [1,2,3,4][3:1:-1] }} {{ (1,2,3)[1:] }} {{ [1,2][5] }}|{{ 'ab'[9] }}|")
add("{{ [1,2][::0] }}")
add("{{ x[1:] }}", x=None)
add("{{ x[1:] }}")
add("{{ d.items is callable }}|{{ d['items'] }}|{{ d.b }}|{{ d['a'] }}|{{ d.nested.x }}|{{ d.missing }}|{{ d[0] }}|", d=D)
add("{{ d.missing.x }}", d=D)
add("{{ d.nested.z.x }}|{{ none.x }}|{{ none['x'] }}|", d=D)
add("{{ d.__class__ }}|", d=D)
add("{{ d.__class__() }}", d=D)
add("{{ [].append }}|")
add("{{ [].append(1) }}")
add("{{ d.update({}) }}", d=D)
add("{{ d.pop('a') }}", d=D)
add("{{ 'abc'.upper is callable }}")
add("{{ 'abc'.nope }}|{{ 'abc'['upper']() }}|{{ (1).real }}|{{ [1,2]['count'](1) }}")
add("{{ 'abc'.nope() }}")
add("{{ x.y }}")
add("{{ x['y'] }}")
add("{{ x() }}")
add("{{ 'abc'() }}")
add("{{ msgs[0].role }}|{{ msgs[-1]['content'] }}|{{ msgs[2].tool_calls[0].function.arguments.x }}|{{ msgs.0.role }}", msgs=MSGS)

# --- statements and scoping --------------------------------------------------
add("{% set x = 1 %}{% if true %}{% set x = 2 %}{% endif %}{{ x }}")
add("{% set x = 1 %}{% for i in [1,2] %}{% set x = i %}{{ x }}{% endfor %}{{ x }}")
add("{% for i in [1,2,3] %}{% if i == 2 %}{{ y }}{% endif %}{% set y = i %}{% endfor %}|{{ y }}")
add("{% set ns = namespace(x=0, items=[]) %}{% for i in [1,2,3] %}{% set ns.x = ns.x + i %}{% set ns.items = ns.items + [i] %}{% endfor %}{{ ns.x }} {{ ns.items }} {{ ns.missing }}|{{ ns }}")
add("{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}{{ ns['a'] }}")
add("{% set x = 1 %}{% set x.y = 2 %}")
add("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set (c, d) = [3, 4] %}{{ c }}{{ d }}")
add("{% set a, b = [1] %}")
add("{% set a, b = [1, 2, 3] %}")
add("{% for a, b in [[1, 2], (3, 4), 'xy'] %}{{ a }}{{ b }};{% endfor %}")
add("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|{% for k in d %}{{ k }},{% endfor %}", d=D)
add("{% for c in 'héllo' %}{{ c }}.{% endfor %}")
add("{% for x in [] %}a{% else %}empty{% endfor %}|{% for x in [1] %}a{% else %}empty{% endfor %}")
add("{% for x in none %}a{% endfor %}")
add("{% for x in 5 %}a{% endfor %}")
add("{% for x in undefined_var %}a{% else %}u{% endfor %}")
add("{% for x in [1,2,3,4,5] if x is odd %}{{ loop.index }}:{{ x }}/{{ loop.length }}{% if not loop.last %},{% endif %}{% endfor %}")
add("{% for x in 'abc' %}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.depth }}{{ loop.depth0 }}|{% endfor %}")
add("{% for x in [1,2,3] %}{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }};{% endfor %}")
add("{% for x in [1,2,3] %}{{ loop.cycle('a', 'b') }}{% endfor %}|{% for x in [1,1,2] %}{{ loop.changed(x) }}{% endfor %}")
add("{% for x in [1,2,3,4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}")
add("{% for x in [1,2] %}{% for y in 'ab' %}{{ loop.index }}{{ y }}{% endfor %}{{ loop.index }}|{% endfor %}")
add("{% for x in [1,2] %}{% set outer = loop %}{% for y in [3] %}{{ outer.index }}{{ loop.index }}{% endfor %}{% endfor %}")
add("{% for item in tree recursive %}<{{ item.name }}{% if item.children %}[{{ loop(item.children) }}]{% endif %}{{ loop.depth }}>{% endfor %}",
    tree=[{"name": "a", "children": [{"name": "b", "children": []}, {"name": "c"}]}, {"name": "d"}])
add("{% for x in [1] %}{{ loop(x) }}{% endfor %}")
add("{{ loop }}")
add("{% break %}")
add("{% macro m(a, b=2, c=a) %}{{ a }}-{{ b }}-{{ c }}{% endmacro %}{{ m(1) }}|{{ m(1, 3) }}|{{ m(1, c=5) }}|{{ m() }}|{{ m }}")
add("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}")
add("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, z=2) }}")
add("{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, z=4) }}")
add("{% macro m() %}[{{ caller() }}]{% endmacro %}{% call m() %}inside{% endcall %}")
add("{% macro m() %}[{{ caller(1, 2) }}]{% endmacro %}{% call(a, b) m() %}{{ a }}+{{ b }}{% endcall %}")
add("{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}{{ fact(5) }}")
add("{% macro f() %}{{ x }}{% endmacro %}{% set x = 1 %}{{ f() }}{% set x = 2 %}{{ f() }}")
add("{% macro f() %}{% if y is not defined %}{% set y = 'dflt' %}{% endif %}{{ y }}{% endmacro %}{{ f() }}|{% set y = 'top' %}{{ f() }}")
add("{% macro f() %}{% set z = 1 %}{% endmacro %}{{ f() }}{{ z }}")
add("{% macro inf() %}{{ inf() }}{% endmacro %}{{ inf() }}")
add("{% set x %}a{{ 1 + 1 }}b{% endset %}{{ x }}|{% set y | upper %}abc{% endset %}{{ y }}")
add("{% filter upper %}abc {{ 'def' }}{% endfilter %}|{% filter trim | upper %}  x  {% endfilter %}")
add("{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a }}")
add("{% raw %}{{ not rendered }}{% endraw %}|{%- raw -%}  {{ x }}  {%- endraw -%}|")
add("{# comment #}a{#- c -#} b {#+ c +#} c")
add("{% generation %}gen {{ 1 }}{% endgeneration %}")
add("{% do x %}")
add("{% include 'x.jinja' %}")
add("{% if false %}{% include 'x.jinja' %}{% endif %}ok")
add("{% extends 'base' %}")
add("{% import 'x' as y %}")
add("{% block b %}in block {{ x }}{% endblock %}", x=1)
add("{{ x | nosuchfilter }}")
add("{% if false %}{{ x | nosuchfilter }}{% endif %}ok")
add("{% if true %}{{ x | nosuchfilter }}{% endif %}ok")
add("{{ x is nosuchtest }}")
add("{{ foo( }}")
add("{% if %}")
add("{% if true %}")
add("{% endif %}")
add("{% for %}")
add("{{ 'unterminated }}")
add("{% set = 1 %}")
add("{{ 1 + }}")
add("{{ a.b.c.d }}")
add("{{ (a) }}{{ a }}{{ a|default('d') }}{{ none|default('d') }}{{ ''|default('d', true) }}{{ a|d('x') }}")

# --- whitespace control ------------------------------------------------------
WS = [
    "  {% if true %}\n    yes\n  {% endif %}\nafter",
    "a\n  {%- if true %}\nb\n  {%- endif %}\nc",
    "a\n  {%+ if true %}\nb\n  {% endif +%}\nc",
    "  {{ 'v' }}  \n  {% set x = 1 %}  \nx",
    "line\n    {# comment #}\nnext\n  {#- c2 -#}  \nlast",
    "{% for i in [1,2] %}\n  item {{ i }}\n{% endfor %}\n",
    "{% for i in [1,2] -%}\n  item {{ i }}\n{%- endfor %}\n\n",
    "a {{- ' b ' -}} c\n\n d",
    "x\r\ny\rz\n{% if true %}\r\n w\r\n{% endif %}\r\n",
    "\t{% if true %}\ttabbed\n\t{% endif %}\n",
    "text  {% if true %}same line{% endif %}  \nend",
    "{{ 'a' }}\n    {% if true %}b{% endif %}",
    "trailing newline\n",
    "two trailing newlines\n\n",
    "{% macro m() %}\n  body\n{% endmacro %}\n{{ m() }}|",
    "{% raw %}\n  raw {{ x }}\n{% endraw %}\nafter",
    "   {% raw %}x{% endraw %}",
    "a\u00a0{%- if true %}b{% endif %}",
    "{{- 'lead' }}  \n",
    "{%- set x = 1 -%}\n\n  {{ x }}  \n\n{%- if true -%}  y  {%- endif -%}\n",
    "{{ {'a': {'b': 1}} }}{{ {'x': 1}['x'] }}",
]
for w in WS:
    add(w)

# --- strings methods -----------------------------------------------------------
add("[{{ '  a b  '.strip() }}][{{ 'xxaxx'.strip('x') }}][{{ '\\n\\n a\\n'.lstrip('\\n') }}][{{ ' a '.rstrip() }}][{{ '\u3000a\u00a0'.strip() }}]")
add("{{ 'a,b,,c'.split(',') }} {{ ' a  b \\n c '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a b c'.split(none, 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ '  a b  '.rsplit(None, 1) }} {{ ''.split() }} {{ ''.split(',') }}")
add("{{ 'a'.split('') }}")
add("{{ 'aaa'.replace('a', 'b', 2) }} {{ 'ab'.replace('', '-') }} {{ 'x<think>y</think>z'.split('</think>')[-1] }} {{ 'abc'.startswith('ab') }} {{ 'abc'.startswith(('x', 'a')) }} {{ 'abc'.endswith('bc') }} {{ 'abc'.startswith('b', 1) }}")
add("{{ 'abc'.startswith(['a']) }}")
add("{{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} {{ 'they\\'re bill\\'s'.title() }} {{ 'ABC'.lower() }} {{ 'abc'.upper() }} {{ 'aBc'.swapcase() }}")
add("{{ 'abcabc'.find('c') }} {{ 'abcabc'.rfind('c') }} {{ 'abc'.find('z') }} {{ 'abcabc'.count('bc') }} {{ 'héllo'.find('l') }} {{ 'abcabc'.index('c', 3) }}")
add("{{ 'abc'.index('z') }}")
add("{{ ', '.join(['a', 'b']) }} {{ ''.join('xyz') }}")
add("{{ ', '.join([1, 2]) }}")
add("{{ '12'.isdigit() }} {{ 'ab'.isalpha() }} {{ 'a1'.isalnum() }} {{ ' '.isspace() }} {{ 'ab'.islower() }} {{ 'AB'.isupper() }} {{ ''.isdigit() }} {{ 'Ab Cd'.istitle() }}")
add("[{{ 'ab'.center(6) }}][{{ 'ab'.center(7, '*') }}][{{ 'ab'.ljust(4) }}][{{ 'ab'.rjust(4, '0') }}][{{ '42'.zfill(5) }}][{{ '-42'.zfill(5) }}]")
add("{{ 'a=b=c'.partition('=') }} {{ 'a=b=c'.rpartition('=') }} {{ 'abc'.removeprefix('a') }} {{ 'abc'.removesuffix('c') }} {{ 'a\\nb\\r\\nc'.splitlines() }} {{ 'a\\nb'.splitlines(true) }}")
add("{{ '{} and {}'.format('a', 1) }} {{ '{0}{0}'.format('x') }} {{ '{name}!'.format(name='n') }} {{ '{:>5}|{:<4}|{:^5}'.format('a', 'b', 'c') }} {{ '{:.2f} {:5d} {:x} {!r}'.format(3.14159, 42, 255, 'q') }}")
add("{{ '%s is %d' % ('a', 3) }} {{ '%5.1f|%-4s|%03d' % (3.14159, 'x', 7) }} {{ '%(a)s-%(b)r' % {'a': 1, 'b': 'x'} }} {{ '%s' % none }} {{ '100%%' % () }}")
add("{{ '%d' % 'x' }}")
add("{{ '%s %s' % ('a',) }}")

# --- dict and list methods -------------------------------------------------------------
add("{{ d.keys() }} {{ d.values()|list|length }} {{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 'dflt') }} {{ d.items()|list|first }} {{ d.copy() == d }}", d=D)
add("{{ [1,2,1].count(1) }} {{ [1,2].index(2) }} {{ (1,2).index(1) }} {{ [3,1].copy() }}")
add("{{ [1,2].index(5) }}")
add("{{ d.get() }}", d=D)

# --- filters ---------------------------------------------------------------------
add("{{ -3|abs }} {{ -2.5|abs }} {{ 'abc'|capitalize }} {{ 'ab'|center(6) }}| {{ [1,2]|count }} {{ 'héllo'|length }} {{ {'a':1}|length }} {{ undefined_x|length }}")
add("{{ none|length }}")
add("{{ 5|length }}")
add("{{ {'b': 1, 'a': 2, 'C': 0}|dictsort }} {{ {'b': 1, 'a': 2}|dictsort(by='value') }} {{ {'b': 1, 'a': 2}|dictsort(reverse=true) }} {{ {'b': 1, 'A': 2, 'a': 3}|dictsort(true) }}")
add("{{ '<a href=\"x\">&\\'</a>'|e }} {{ '<b>'|escape }} {{ 5|e }} {{ none|e }}")
add("{{ [3,1,2]|first }} {{ 'abc'|first }} {{ []|first }}| {{ [3,1,2]|last }} {{ 'abc'|last }} {{ {'a':1,'b':2}|first }} {{ {'a':1,'b':2}|last }}")
add("{{ x|last }}")
add("{{ '3.5'|float }} {{ 'x'|float }} {{ none|float(1.5) }} {{ 2|float }} {{ ' 1_0.5 '|float }} {{ 'inf'|float }} {{ true|float }}")
add("{{ '42'|int }} {{ '42.7'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ 3.9|int }} {{ -3.9|int }} {{ '0x1A'|int(0, 16) }} {{ 'ff'|int(base=16) }} {{ '1_000'|int }} {{ none|int }} {{ true|int }} {{ '  12  '|int }}")
add("{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(2, blank=true) }}|{{ 'a\\nb'|indent('> ') }}|{{ ''|indent }}|")
add("{% for k, v in d|items %}{{ k }}{{ v }};{% endfor %}{{ undefined_x|items|list }}", d={"x": 1, "y": [2]})
add("{% for x in [1,2]|items %}{% endfor %}")
add("{% for x in none|items %}{% endfor %}")
add("{{ [1,2,3]|join }} {{ [1,2,3]|join(', ') }} {{ [{'n':'a'},{'n':'b'}]|join('-', attribute='n') }} {{ 'abc'|join('.') }} {{ undefined_x|join(',') }}")
add("{{ none|join(',') }}")
add("{{ 'abc'|list }} {{ {'a':1,'b':2}|list }} {{ (1,2)|list }} {{ undefined_x|list }}")
add("{{ 'AbC'|lower }} {{ 'abc'|upper }} {{ none|lower }} {{ 123|upper }}")
add("{{ ['a','b']|map('upper')|list }} {{ [{'a':1},{'a':2},{}]|map(attribute='a')|list }} {{ [{'a':{'b':1}}]|map(attribute='a.b')|list }} {{ [[1,2]]|map(attribute='0')|list }} {{ [{'a':1},{}]|map(attribute='a', default=0)|list }} {{ none|map('upper')|list }}")
add("{{ [3,1,2]|max }} {{ [3,1,2]|min }} {{ ['b','A','c']|max }} {{ ['b','A','c']|max(case_sensitive=true) }} {{ [{'v':2},{'v':5}]|max(attribute='v') }} {{ []|max }}|")
add("{{ [1,2,3,4]|select('odd')|list }} {{ [1,2,3,4]|reject('odd')|list }} {{ [0,1,'',none,'a']|select|list }} {{ [1,2,3]|select('>', 1)|list }} {{ [1,2,3]|select('in', [1,3])|list }} {{ ['a','b']|reject('equalto','a')|list }}")
add("{{ msgs|selectattr('role', 'equalto', 'user')|list|length }} {{ msgs|rejectattr('role', 'equalto', 'user')|map(attribute='role')|join(',') }} {{ msgs|selectattr('tool_calls')|list|length }} {{ msgs|selectattr('tool_calls', 'defined')|map(attribute='role')|list }}", msgs=MSGS)
add("{{ [1]|select('nosuchtest')|list }}")
add("{{ 'aaa'|replace('a', 'b') }} {{ 'aaa'|replace('a', 'b', 1) }} {{ 5|replace(5, 6) }} {{ none|replace('N', 'n') }}")
add("{{ 'abc'|reverse }} {{ [1,2,3]|reverse|list }} {{ (1,2)|reverse|list }} {{ {'a':1,'b':2}|reverse|list }}")
add("{{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 2.4|round(method='ceil') }} {{ 2.6|round(method='floor') }} {{ 7|round }} {{ 1234|round(-2) }} {{ -0.5|round }} {{ 0.125|round(2) }}")
add("{{ 5|safe }} {{ '<b>'|safe }} {{ none|safe }}")
add("{{ [1,2,3,4,5]|slice(2)|list }} {{ [1,2,3,4,5]|slice(3, 0)|list }} {{ [1,2,3,4,5]|batch(2)|list }} {{ [1,2,3]|batch(2, 'x')|list }}")
add("{{ [3,1,2]|sort }} {{ [3,1,2]|sort(reverse=true) }} {{ ['b','A','c']|sort }} {{ ['b','A','c']|sort(case_sensitive=true) }} {{ [{'n':2,'m':'x'},{'n':1,'m':'y'}]|sort(attribute='n')|map(attribute='m')|join }} {{ [{'a':1,'b':2},{'a':1,'b':1}]|sort(attribute='a,b')|map(attribute='b')|join }}")
add("{{ [1,'a']|sort }}")
add("{{ 5|string }} {{ none|string }} {{ [1,'a']|string }} {{ undefined_x|string }}|{{ 'abc'|string|length }}")
add("{{ '<p>Hello <b>World</b><!-- c -->  &amp; x</p>'|striptags }}")
add("{{ [1,2,3]|sum }} {{ [1.5,2]|sum }} {{ [{'v':1},{'v':2}]|sum(attribute='v') }} {{ [1]|sum(start=10) }} {{ []|sum }}")
add("{{ [[1],[2]]|sum(start=[]) }}")
add("{{ 'hello wORLD-foo(bar) [baz] <q> x_y'|title }} {{ \"they're\"|title }}")
add("[{{ '  x  '|trim }}][{{ 'xxaxx'|trim('x') }}][{{ 5|trim }}][{{ none|trim }}][{{ undefined_x|trim }}][{{ [1]|trim }}][{{ {'a':' b '}|trim }}]")
add("{{ 'foo bar baz qux'|truncate(9) }}|{{ 'foo bar baz qux'|truncate(9, true) }}|{{ 'foo bar baz qux'|truncate(11, end='!') }}|{{ 'short'|truncate(9) }}|{{ 'foo bar baz qux'|truncate(9, leeway=0) }}")
add("{{ [1,2,1,'a','A']|unique|list }} {{ ['a','A']|unique(true)|list }} {{ [{'x':1},{'x':1},{'x':2}]|unique(attribute='x')|list|length }}")
add("{{ 'a b&c/d'|urlencode }} {{ {'a': 'x y', 'b': 1}|urlencode }} {{ [('k', 'v w')]|urlencode }}")
add("{{ 'one two, three'|wordcount }} {{ 1000|filesizeformat }} {{ 1|filesizeformat }} {{ 1234567|filesizeformat }} {{ 1024|filesizeformat(true) }}")
add("{{ '%s-%s'|format('a', 'b') }} {{ '%(x)s'|format(x=1) }}")
add("{{ d|attr('items') is callable }} {{ d|attr('a') }}|{{ 'abc'|attr('upper')() }}", d=D)
add("{{ 'x'|pprint }} {{ {'a': [1]}|pprint }}")

# --- tojson ---------------------------------------------------------------------
TJ = {"s": "héllo \"q\" \\ \n\t\u0001 </script> & é 😀", "i": 1, "f": 1.0, "big": 12345678901234567890, "e": 1e20, "small": 1e-7, "neg": -0.0, "t": True, "n": None,
      "l": [1, 2.5, [], {}], "d": {"z": 1, "a": {"b": [None]}}}
add("{{ v|tojson }}", v=TJ)
add("{{ v|tojson(indent=2) }}", v=TJ)
add("{{ v|tojson(indent=0) }}", v=TJ)
add("{{ v|tojson(indent='\\t') }}", v=TJ)
add("{{ v|tojson(separators=(',', ':')) }}", v=TJ)
add("{{ v|tojson(indent=2, separators=(', ', ' = ')) }}", v=TJ)
add("{{ v|tojson(sort_keys=true) }}", v=TJ)
add("{{ v|tojson(ensure_ascii=true) }}", v=TJ)
add("{{ v|tojson(true, 1, none, true) }}", v=TJ)
add("{{ 'x'|tojson }} {{ 5|tojson }} {{ none|tojson }} {{ (1, 'a')|tojson }} {{ {1: 'a', none: 'b', 1.5: 'c', true: 'd'}|tojson }} {{ [1.0, 0.5, 100.0, 1e16, 1.5e-5]|tojson }}")
add("{{ undefined_x|tojson }}")
add("{{ {'a': undefined_x}|tojson }}")
add("{{ namespace(a=1)|tojson }}")
add("{{ {(1,2): 'a'}|tojson }}")
add("{{ {'b': 1, 'a': 2, 1: 3}|tojson(sort_keys=true) }}")
add("{{ v|tojson }}", v={"args": {"x": 1.0, "y": 2, "z": 3.14, "w": 100.0, "big": 1e300}})

# --- tests ------------------------------------------------------------------------
add("{{ x is defined }} {{ undefined_x is defined }} {{ undefined_x is undefined }} {{ none is none }} {{ 0 is none }} {{ x is none }}", x=None)
add("{{ true is boolean }} {{ 1 is boolean }} {{ false is false }} {{ 0 is false }} {{ true is true }} {{ 1 is integer }} {{ true is integer }} {{ 1.0 is float }} {{ 1 is number }} {{ true is number }} {{ 'a' is number }}")
add("{{ 'a' is string }} {{ 1 is string }} {{ {} is mapping }} {{ [] is mapping }} {{ [] is iterable }} {{ 'a' is iterable }} {{ {} is iterable }} {{ 1 is iterable }} {{ none is iterable }} {{ undefined_x is iterable }} {{ [] is sequence }} {{ 1 is sequence }}")
add("{{ namespace() is mapping }} {{ namespace() is iterable }} {{ range is callable }} {{ 'a' is callable }} {{ undefined_x is callable }} {{ 'a'.upper is callable }}")
add("{{ 3 is odd }} {{ 3 is even }} {{ 4 is divisibleby 2 }} {{ 4 is divisibleby(3) }} {{ 'a' is lower }} {{ 'A' is upper }} {{ 'a' is escaped }}")
add("{{ 1 is eq 1 }} {{ 1 is equalto 2 }} {{ 1 is ne 2 }} {{ 1 is lt 2 }} {{ 2 is le 2 }} {{ 3 is gt 2 }} {{ 3 is ge 4 }} {{ 1 is in [1] }} {{ 'a' is in 'abc' }} {{ 1 is greaterthan 0 }} {{ 1 is lessthan 0 }}")
add("{{ none is sameas none }} {{ true is sameas true }} {{ 1 is sameas 1 }} {{ x is sameas x }} {{ [] is sameas [] }} {{ 'upper' is filter }} {{ 'nope' is filter }} {{ 'odd' is test }}", x=[1])
add("{{ not x is none }} {{ not x is defined }} {{ x is not none and x is string }} {{ x is string or false }}", x="s")
add("{{ 'a' is odd }}")

# --- globals ---------------------------------------------------------------------
add("{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(5, 0, -2)|list }} {{ range(0)|list }} {% for i in range(2) %}{{ i }}{% endfor %}")
add("{{ range(100001)|length }}")
add("{{ range(1, 2, 0) }}")
add("{{ dict(a=1, b=2) }} {{ dict({'x': 1}, y=2) }} {{ dict([('k', 'v')]) }}")
add("{% set c = cycler('a', 'b') %}{{ c.next() }}{{ c.next() }}{{ c.next() }}{{ c.current }}{% set j = joiner('|') %}{{ j() }}x{{ j() }}y")
add("{{ raise_exception('boom ' ~ 1) }}")
add("{{ raise_exception(5) }}")
add("{{ strftime_now('%Y-%m-%d %H:%M:%S %a %A %b %B %d %e %j %I %p %y %U %W %w %u %V %G %C %D %F %T %R %r %c %x %X %%') }}")
add("{{ strftime_now('%-d %-m %_d|%z|%Z|%f|%k|%l|%s|%Q') }}")
add("{{ strftime_now('%d %b %Y') }} {{ strftime_now('%B %d, %Y') }}")
add("{{ strftime_now(5) }}")
add("{{ messages is defined }} {{ tools is defined }}")

# --- misc corner cases --------------------------------------------------------------
add("{{ x.tool_calls is defined and x.tool_calls is not none }} {{ x.content is none }} {{ x.get('content') }} {{ x.content.content is defined }}", x={"role": "tool", "content": None})
add("{{ x.content.content }}", x={"content": "s"})
add("{{ x.content.content.y }}", x={"content": "s"})
add("{{ [1,2] == (1,2) }} {{ {'a': 1, 'b': 2} == {'b': 2, 'a': 1} }} {{ msgs[1] == msgs[1] }} {{ 1 == true }} {{ 'a' != none }}", msgs=MSGS)
add("{% set l = [1, 2] %}{% set l2 = l + [3] %}{{ l }}{{ l2 }}")
add("{{ {'a': 1}['a'] }} {{ {'a': 1}.a }} {{ {'a': {'b': 2}}.a.b }} {{ {0: 'z'}[0] }} {{ {0: 'z'}[false] }} {{ {'0': 'z'}[0] }}|")
add("{{ 'abc'[1] }} {{ [1,2,3][true] }} {{ 'abc'[1.0] }}|")
add("{{ x|tojson }}", x={"k": [1, {"n": 2.0}], "e": "", "u": "\u00e9\u4e2d"})
add("{{ 10000000000000000.0 }} {{ 1e22 }} {{ 123456789012345678.0 }} {{ 0.0001 }} {{ 0.00001 }} {{ 1.23e-5 }} {{ 3.0e10 }} {{ (0.1 + 0.2) }} {{ 1/3 }} {{ 2.0 ** 0.5 }}")
add("{{ 1e400 }} {{ -1e400 }} {{ (1e400 - 1e400) }}")
add("{{ 'A' ~ 1.0 ~ 2 ~ true }}")
add("{% if 'x' %}T{% endif %}{% if [] %}L{% endif %}{% if {} %}D{% endif %}{% if 0.0 %}F{% endif %}{% if namespace() %}N{% endif %}{% if undefined_x %}U{% endif %}")
add("{{ 1 and 2 }} {{ 0 and 2 }} {{ 0 or 'x' }} {{ '' or none }} {{ none or [] }} {{ not none }}")
add("{{ 'a' if undefined_x else 'b' }} {{ undefined_x or 'fallback' }} {{ undefined_x and 'x' }}|")
add("{% set x = none %}{{ x is none }}{{ x.attr is defined }}")
add("{{ foo is defined }}{% set foo = 1 %}{{ foo is defined }}")
add("{% for m in msgs if m.role != 'system' %}{{ loop.index }}{{ m.role }}{% endfor %}", msgs=MSGS)
add("{% for m in msgs %}{% if m.role == 'user' %}{% set found = true %}{% endif %}{% endfor %}{{ found is defined }}", msgs=MSGS)
add("{{ messages[0]['content'][0]['text'] }}", messages=[{"content": [{"type": "text", "text": "T"}]}])
add("{{ messages[0]['content'] + 'x' }}", messages=[{"content": [{"type": "text", "text": "T"}]}])
add("{{ messages[0].content.startswith('x') }}", messages=[{"content": None}])
add("{{ tools[0] }}", tools=None)
add("{{ x['a']['b'] }}", x={"a": None})
add("{{ x.a.b }}", x={"a": None})
add("{{ ('a', 'b')|join(',') }}{{ ['x']|first|upper }}")
add("{{ 1|abs is number }} {{ -1|abs }}")
add("{{ -x|length }}", x="abc")
add("{{ 'a' + 'b'|upper }} {{ ('a' + 'b')|upper }} {{ 1 + 2|string }}")
add("{{ x|default(1) }}{{ x|default(1)|string }}", x=None)

# --- sandbox: escape attempts must fail as in jinja2's ImmutableSandboxedEnvironment ---
ESCAPES = [
    "{{ ''.__class__ }}|", "{{ ''.__class__.__mro__ }}", "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ messages.__class__ }}|", "{{ messages.__class__.__base__ }}", "{{ range.__globals__ }}|", "{{ range.__init__ }}|",
    "{{ cycler.__init__.__globals__ }}", "{{ namespace.__init__.__globals__.os }}", "{{ lipsum.__globals__ }}|",
    "{{ raise_exception.__globals__ }}|", "{{ strftime_now.__globals__['datetime'] }}", "{{ joiner.__init__.__globals__ }}",
    "{{ self }}|{{ config }}|{{ request }}|{{ os }}|", "{{ self.__init__ }}", "{{ messages.pop() }}", "{{ messages.append(1) }}",
    "{{ messages[0].update({'role': 'x'}) }}", "{{ messages[0].clear() }}", "{{ messages.sort() }}", "{{ messages[0].setdefault('a', 1) }}",
    "{% set x = messages.insert(0, 1) %}", "{{ (messages|first).popitem() }}", "{{ ''.format.__globals__ }}", "{{ '{0.__class__}'.format('') }}",
    "{{ '{0.__class__.__mro__}'.format(1) }}", "{{ messages|attr('__class__') }}|", "{{ (messages|attr('__class__'))() }}",
    "{{ messages['__class__'] }}|", "{{ messages[0]['__class__'] }}|", "{{ loop }}|{% for x in [1] %}{{ loop.__class__ }}|{% endfor %}",
    "{% for x in [1] %}{{ loop.__init__.__globals__ }}{% endfor %}", "{{ dict.__call__ }}|", "{{ dict(a=1).__class__ }}|",
    "{{ 1 .__class__ }}|", "{{ (1).__class__.__bases__ }}", "{{ [].__len__() }}", "{% macro m() %}{% endmacro %}{{ m.__globals__ }}|{{ m._func }}|",
    "{{ namespace(a=1).__dict__ }}|", "{{ namespace(a=1)._Namespace__attrs }}|",
]
for e in ESCAPES:
    add(e, messages=[{"role": "user", "content": "hi"}])

with open(os.path.join(os.path.dirname(__file__), "snippets.jsonl"), "w", encoding="utf-8") as f:
    for src, vars in S:
        rec = {"src": src, "vars": vars}
        rec.update(render(src, json.loads(json.dumps(vars))))
        f.write(json.dumps(rec, ensure_ascii=False) + "\n")
print(len(S), "snippets")
