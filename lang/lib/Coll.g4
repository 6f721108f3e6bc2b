// The .coll language grammar. docs/language.md is its reference; the AST
// builder (ASTBuilder.cpp) turns this parse tree into the owned AST, and every
// check that is not pure syntax lives in Sema.cpp.
grammar Coll;

// ---------------------------------------------------------------------------
// Declarations
// ---------------------------------------------------------------------------

program : topDecl* EOF ;

topDecl
  : paramDecl
  | funcDecl
  | collectiveDecl
  | algorithmDecl
  ;

// `param name = default;` -- overridable with `collc -D name=value`.
paramDecl : 'param' name=ident '=' value=expr ';' ;

// `def name(a, b) = expr;` -- a named integer function, at file level or in
// a body.
funcDecl : 'def' name=ident '(' (params+=ident (',' params+=ident)*)? ')' '=' body=expr ';' ;

// A user-declared collective with explicit buffer sizes and conditions.
collectiveDecl
  : 'collective' name=ident '(' (collParam (',' collParam)*)? ')'
    '{' collectiveItem* '}'
  ;

collParam : name=ident ('=' value=expr)? ;

collectiveItem
  : kw=('input' | 'output') '[' size=expr ']' ';'                 # BufferSizeItem
  | 'pre' ref=expr forClause? ';'                                  # PreItem
  | 'post' cond=expr forClause? ';'                                # PostItem
  | requireStmt                                                    # RequireItem
  | letStmt                                                        # LetItem
  ;

// `for r in 0 .. N, i in 0 .. C if r != root`
forClause : 'for' binder (',' binder)* ('if' cond=expr)? ;
binder : name=ident 'in' lo=expr '..' hi=expr ;

algorithmDecl
  : 'algorithm' name=ident 'implements' coll=ident
    '(' (args+=namedArg (',' args+=namedArg)*)? ')'
    ('with' opts+=namedArg (',' opts+=namedArg)*)?
    body=block
  ;

namedArg : name=ident '=' value=expr ;

// ---------------------------------------------------------------------------
// Statements
// ---------------------------------------------------------------------------

block : '{' stmt* '}' ;

stmt
  : letStmt
  | assignStmt
  | forStmt
  | ifStmt
  | requireStmt
  | scratchDecl
  | funcDecl
  | block
  | fenceStmt
  | exprStmt
  ;

letStmt : 'let' name=ident '=' value=expr ';' ;
assignStmt : name=ident '=' value=expr ';' ;
forStmt : 'for' var=ident 'in' lo=expr '..' hi=expr ('step' step=expr)? body=block ;
ifStmt : 'if' cond=expr then=block ('else' (elseIf=ifStmt | elseBlock=block))? ;
requireStmt : 'require' cond=expr (':' message=STRING)? ';' ;
scratchDecl : 'scratch' name=ident '[' size=expr ']' ';' ;
fenceStmt : 'fence' ';' ;
exprStmt : expr ';' ;

// ---------------------------------------------------------------------------
// Expressions, lowest precedence last (C's order)
// ---------------------------------------------------------------------------

expr
  : primary                                                        # PrimaryExpr
  | op=('-' | '!' | '~') operand=expr                              # UnaryExpr
  | lhs=expr op=('*' | '/' | '%') rhs=expr                         # BinaryExpr
  | lhs=expr op=('+' | '-') rhs=expr                               # BinaryExpr
  | lhs=expr op=('<<' | '>>') rhs=expr                             # BinaryExpr
  | lhs=expr op=('<' | '<=' | '>' | '>=') rhs=expr                 # BinaryExpr
  | lhs=expr op=('==' | '!=') rhs=expr                             # BinaryExpr
  | lhs=expr op='&' rhs=expr                                       # BinaryExpr
  | lhs=expr op='^' rhs=expr                                       # BinaryExpr
  | lhs=expr op='|' rhs=expr                                       # BinaryExpr
  | lhs=expr op='&&' rhs=expr                                      # BinaryExpr
  | lhs=expr op='||' rhs=expr                                      # BinaryExpr
  | <assoc=right> cond=expr '?' then=expr ':' otherwise=expr        # CondExpr
  ;

primary
  : INT                                                            # IntLit
  | kw=('true' | 'false')                                          # BoolLit
  | callee=ident '(' (callArg (',' callArg)*)? ')'                    # CallExpr
  | buf=bufferName '[' rank=expr ']'
      '[' lo=expr ('..' hi=expr ('step' step=expr ('width' width=expr)?)?)? ']'  # ChunkRef
  | name=ident                                                     # NameExpr
  | '(' inner=expr ')'                                             # ParenExpr
  ;

bufferName : kw=('input' | 'output') | name=ident ;

// Positional or named (`to: dst`, `channel: 1`); a comprehension only in
// `reduce(input[j][i] for j in 0 .. N)` inside a post-condition.
callArg : (label=ident ':')? value=expr forClause? ;

// Words that are keywords only where they introduce a clause, so programs
// may still name a loop variable `step`.
ident : ID | 'step' | 'width' | 'fence' | 'pre' | 'post' | 'with' | 'implements' | 'def' ;

// ---------------------------------------------------------------------------
// Tokens
// ---------------------------------------------------------------------------

INT : [0-9] [0-9_]* | '0x' [0-9a-fA-F_]* ;
ID : [a-zA-Z_] [a-zA-Z_0-9]* ;
STRING : '"' ( '\\' ~[\r\n] | ~["\\\r\n] )* '"' ;
UNTERMINATED_STRING : '"' ( '\\' ~[\r\n] | ~["\\\r\n] )* ;

LINE_COMMENT : '//' ~[\r\n]* -> channel(HIDDEN) ;
// An unterminated comment runs to the end of the file; the parser driver
// reports it (a comment token that does not end in `*/`).
BLOCK_COMMENT : '/*' .*? ('*/' | EOF) -> channel(HIDDEN) ;
WS : [ \t\r\n\f]+ -> channel(HIDDEN) ;

// Anything else is one bad character; the parser driver reports it, so the
// lexer itself never fails.
BAD_CHAR : . ;
