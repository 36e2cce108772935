"""Frame syntaxes: how slot values are written as text, and read back.

Every syntax reads (lexer), writes (renderer) and constrains (GBNF grammar) the same
slot plan; :mod:`.base` holds the tokens a lexer hands to the assembler.
"""
