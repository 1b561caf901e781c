-- SPDX-License-Identifier: GPL-2.0
--
-- The pandoc filter behind scripts/gen-man: it turns a man page's front
-- part (Documentation/man/<page>.<section>.md) into the whole page.
--
-- Directives in the front part, each an HTML comment on its own:
--
--   <!-- include: FILE [| SELECTOR]... -->
--       The blocks of FILE (a path relative to the front part), its
--       headings one level up (## becomes a man section, ### a
--       subsection), its title left out. SELECTORs: "@intro" (the text
--       before the first section), "Title" (the section or subsection of
--       that heading, with everything under it; `code` is matched as its
--       text), "-Title" (leave that one out). No positive selector: the
--       whole file.
--   <!-- prototypes: HEADER -->
--       A code block of every kvcache_*() declaration in HEADER, in the
--       header's order, each wrapped to fit the page.
--
-- Then, over the whole page: links to other documents become a man page
-- reference where a page is made from that document (the metadata
-- gen-man-map: "doc=name(section) ...", docs relative to the top), else
-- their text, or for a link whose text is a file name, that document's
-- path under the documentation directory; tables too wide for 80 columns
-- become definition lists (first column the term, the others below it);
-- man sections are upper case; options, paths and code are kept from
-- breaking at their hyphens; and NAME's dash is the \- that lexgrog and
-- lintian want.

local stringify = pandoc.utils.stringify

-- How wide a table may be, in characters, to stay a table: its columns
-- and the 3 between each two, within the 73 of the text at 80 columns
-- (tbl's rule takes one more, and one is spare).
local TABLE_WIDTH = 71
-- A last column this narrow is one of the labelled ones.
local SHORT_COLUMN = 30
-- The widest code line that fits with pandoc's indent of code blocks.
local CODE_WIDTH = 66
-- The widest line of a declaration in the SYNOPSIS code block, at the
-- margin.
local PROTO_WIDTH = 72

local page, top_docs, man_map = '', 'Documentation', {}

local function die(msg)
	io.stderr:write('gen-man.lua: ', msg, '\n')
	os.exit(1)
end

local function dirname(path)
	return path:match('^(.*)/[^/]*$') or '.'
end

-- a/b/../c/./d -> a/c/d
local function normalize(path)
	local out = {}
	for part in path:gmatch('[^/]+') do
		if part == '..' and #out > 0 and out[#out] ~= '..' then
			table.remove(out)
		elseif part ~= '.' then
			table.insert(out, part)
		end
	end
	return table.concat(out, '/')
end

local function read_file(path)
	local f = io.open(path, 'r')
	if not f then
		die('cannot read ' .. path)
	end
	local text = f:read('a')
	f:close()
	return text
end

-- A link in the file src (relative to the top): what it becomes.
local function rewrite_link(link, src)
	local target = link.target
	if target:match('^%a[%w+.-]*:') then
		return nil		-- a URL: pandoc writes it out
	end
	local path = target:match('^([^#]*)')
	if path == '' then
		return link.content	-- a section of this document
	end
	local full = normalize(dirname(src) .. '/' .. path)
	local text = stringify(link.content)
	local m = man_map[full]
	if m and m.page ~= page then
		local ref = { pandoc.Strong(pandoc.Str(m.name)),
			      pandoc.Str('(' .. m.section .. ')') }
		if text:match('%.md$') then
			return ref
		end
		local out = pandoc.List(link.content)
		out:insert(pandoc.Space())
		out:insert(pandoc.Str('('))
		out:extend(ref)
		out:insert(pandoc.Str(')'))
		return out
	end
	local in_docs = full:sub(1, #top_docs + 1) == top_docs .. '/'
	if not in_docs or not full:match('%.md$') then
		return link.content	-- a source file: its name is the text
	end
	local shown = pandoc.Emph(pandoc.Str(full:sub(#top_docs + 2)))
	if text:match('%.md$') then
		return { shown }
	end
	if not target:find('#') then
		return link.content	-- "the admin guide": says which
	end
	-- A section of another document: say which document.
	local out = pandoc.List(link.content)
	out:extend({ pandoc.Space(), pandoc.Str('in'), pandoc.Space(), shown })
	return out
end

-- The blocks of one included file, as a selection of sections.
local function include(spec, from)
	local parts = {}
	for part in (spec .. '|'):gmatch('%s*(.-)%s*|') do
		table.insert(parts, part)
	end
	local file = normalize(dirname(from) .. '/' .. table.remove(parts, 1))
	local doc = pandoc.read(read_file(file), 'markdown-smart')
	local blocks = doc.blocks

	-- "Title" and "-Title" as keys, true once the heading is found.
	local want, drop, intro = {}, {}, false
	for _, p in ipairs(parts) do
		p = p:gsub('`', '')	-- headings are matched as text
		if p == '@intro' then
			intro = true
		elseif p:sub(1, 1) == '-' then
			drop[p:sub(2)] = false
		else
			want[p] = false
		end
	end
	local positive = intro or next(want) ~= nil

	-- A heading named in a selector marks the blocks under it, to the
	-- next heading of its level or above; the deepest mark decides.
	local keep = {}
	local open = {}	-- level -> selected (true), dropped (false), or nil
	local seen_section = false
	for i, b in ipairs(blocks) do
		if b.t == 'Header' then
			for l = b.level, 6 do
				open[l] = nil
			end
			if b.level > 1 then
				seen_section = true
			end
			local title = stringify(b.content)
			if want[title] ~= nil then
				want[title] = true
				open[b.level] = true
			end
			if drop[title] ~= nil then
				drop[title] = true
				open[b.level] = false
			end
		end
		local sel = nil
		for l = 1, 6 do
			if open[l] ~= nil then
				sel = open[l]
			end
		end
		if b.t == 'Header' and b.level == 1 then
			keep[i] = false	-- the document's title
		elseif sel == false then
			keep[i] = false
		elseif not positive then
			keep[i] = true
		else
			keep[i] = sel == true or (intro and not seen_section)
		end
	end
	for title, found in pairs(want) do
		if not found then
			die(file .. ': no section "' .. title .. '"')
		end
	end
	for title, found in pairs(drop) do
		if not found then
			die(file .. ': no section "' .. title .. '"')
		end
	end

	local out = pandoc.List()
	for i, b in ipairs(blocks) do
		if keep[i] then
			if b.t == 'Header' then
				b.level = b.level - 1
			end
			out:insert(pandoc.walk_block(b, {
				Link = function(l) return rewrite_link(l, file) end,
			}))
		end
	end
	return out
end

-- Every kvcache_*() declaration of a C header, wrapped to PROTO_WIDTH.
local function prototypes(spec, from)
	local file = normalize(dirname(from) .. '/' .. spec)
	local lines, decl = {}, nil
	for line in read_file(file):gmatch('[^\n]*') do
		if not decl and line:match('^[%a_][%w_ %*]*kvcache_[%w_]+%(') then
			decl = line
		elseif decl then
			decl = decl .. ' ' .. line
		end
		if decl and decl:find(';') then
			decl = decl:gsub('%s+', ' '):gsub('%( ', '(')
			-- Break after "(" or a comma where a line would be too
			-- long, and go on 8 columns in.
			local out, cur = {}, ''
			for piece in decl:gmatch('[^,(]+[,(]? ?') do
				if #cur + #piece > PROTO_WIDTH and cur ~= '' then
					table.insert(out, (cur:gsub('%s+$', '')))
					cur = '        '
				end
				cur = cur .. piece
			end
			table.insert(out, (cur:gsub('%s+$', '')))
			table.insert(lines, table.concat(out, '\n'))
			decl = nil
		end
	end
	if #lines == 0 then
		die(file .. ': no kvcache_*() declarations')
	end
	return pandoc.List({ pandoc.CodeBlock(table.concat(lines, '\n\n'),
						 { class = 'margin' }) })
end

-- Text that must not break at its hyphens, nor show them as hyphens
-- (options, paths, identifiers): roff with \- for each. ASCII only and
-- no backslash, else pandoc writes it as usual; \& keeps a leading .
-- or ' from reading as a request.
local function unbroken(text, font)
	if text:find('[^ -~]') or text:find('\\') then
		return nil
	end
	local roff = '\\&' .. text:gsub('%-', '\\-')
	if font then
		roff = '\\f[' .. font .. ']' .. roff .. '\\f[R]'
	end
	return pandoc.RawInline('man', roff)
end

local keep_together = {
	Code = function(c)
		if c.text:find('%-') then
			return unbroken(c.text, 'V')
		end
	end,
	Str = function(s)
		if s.text ~= '-' and (s.text:find('^%-') or
		    (s.text:find('/') and s.text:find('%-'))) then
			return unbroken(s.text)
		end
	end,
}

local function cell_inlines(blocks)
	if #blocks == 1 and (blocks[1].t == 'Plain' or blocks[1].t == 'Para') then
		return blocks[1].content
	end
	return { pandoc.Str(stringify(blocks)) }
end

-- A table that fits stays one; a wider one becomes a definition list:
-- the first column is the term; the middle columns, "header: value",
-- one line under it; the last column the text.
local function man_table(tbl)
	local st = pandoc.utils.to_simple_table(tbl)
	local ncols = #st.headers
	local widths = {}
	for c = 1, ncols do
		widths[c] = utf8.len(stringify(st.headers[c])) or 0
	end
	for _, row in ipairs(st.rows) do
		for c = 1, ncols do
			local w = utf8.len(stringify(row[c])) or 0
			if w > widths[c] then
				widths[c] = w
			end
		end
	end
	local total = 3 * (ncols - 1)
	for c = 1, ncols do
		total = total + widths[c]
	end
	if total <= TABLE_WIDTH then
		-- Each column as wide as its widest cell (tbl would give a
		-- column of text blocks a fixed share of the line); pandoc's
		-- widths are fractions of 70 characters.
		for c = 1, ncols do
			st.widths[c] = widths[c] / 70
		end
		return pandoc.utils.from_simple_table(st)
	end
	-- The last column is the text below the others, unless it is as
	-- short as they are (examples, kinds): then it is one of them.
	local labelled = ncols - 1
	if ncols > 2 and widths[ncols] <= SHORT_COLUMN then
		labelled = ncols
	end
	local items = {}
	for _, row in ipairs(st.rows) do
		local defs = pandoc.List()
		if ncols > 2 then
			local line = pandoc.List()
			for c = 2, labelled do
				if stringify(row[c]) ~= '' then
					if #line > 0 then
						line:insert(pandoc.Str(';'))
						line:insert(pandoc.Space())
					end
					line:insert(pandoc.Str(stringify(st.headers[c]) .. ':'))
					line:insert(pandoc.Space())
					line:extend(cell_inlines(row[c]))
				end
			end
			if #line > 0 then
				defs:insert(pandoc.Para(line))
			end
		end
		if labelled < ncols and stringify(row[ncols]) ~= '' then
			defs:extend(row[ncols])
		end
		table.insert(items, { cell_inlines(row[1]), { defs } })
	end
	-- Each term on a line of its own, also a short one: the line below
	-- it starts with "header:", which would read as part of the term.
	local list = pandoc.walk_block(pandoc.DefinitionList(items),
				       keep_together)
	local man = pandoc.write(pandoc.Pandoc({ list }), 'man')
	man = man:gsub('(%.TP\n[^\n]*\n)', '%1.br\n')
	return pandoc.RawBlock('man', man)
end

-- A code block too wide for the indent pandoc gives it (.IP, 7 more
-- columns) starts at the text's margin instead, as do the declarations
-- of a SYNOPSIS (class "margin"). Tabs are 8 columns.
local function man_code(cb)
	local text, widest = {}, 0
	for line in (cb.text .. '\n'):gmatch('([^\n]*)\n') do
		local exp = ''
		for ch in line:gmatch(utf8.charpattern) do
			if ch == '\t' then
				exp = exp .. string.rep(' ', 8 - utf8.len(exp) % 8)
			else
				exp = exp .. ch
			end
		end
		widest = math.max(widest, utf8.len(exp))
		table.insert(text, exp)
	end
	cb.text = table.concat(text, '\n')
	if widest <= CODE_WIDTH and not cb.classes:includes('margin') then
		return cb
	end
	local man = pandoc.write(pandoc.Pandoc({ cb }), 'man')
	return pandoc.RawBlock('man', (man:gsub('^%.IP\n', '.PP\n')))
end

function Pandoc(doc)
	local meta = doc.meta
	local front = stringify(meta['gen-man-front'] or '')
	page = stringify(meta['gen-man-page'] or '')
	top_docs = stringify(meta['gen-man-docs'] or 'Documentation')
	if front == '' or page == '' then
		die('gen-man-front and gen-man-page must be set')
	end
	for doc_path, name, section in
	    stringify(meta['gen-man-map'] or ''):gmatch('(%S+)=(%S+)%((%w+)%)') do
		man_map[doc_path] = { name = name, section = section,
				      page = name .. '.' .. section }
	end

	local blocks = pandoc.List()
	for _, b in ipairs(doc.blocks) do
		local kind, spec
		if b.t == 'RawBlock' and b.format == 'html' then
			kind, spec = b.text:match('^<!%-%-%s*(%a+):%s*(.-)%s*%-%->%s*$')
		end
		if kind == 'include' then
			blocks:extend(include(spec, front))
		elseif kind == 'prototypes' then
			blocks:extend(prototypes(spec, front))
		elseif kind then
			die(front .. ': unknown directive ' .. kind)
		else
			blocks:insert(pandoc.walk_block(b, {
				Link = function(l) return rewrite_link(l, front) end,
			}))
		end
	end

	local in_name = false
	blocks = pandoc.walk_block(pandoc.Div(blocks), {
		Table = man_table,
		CodeBlock = man_code,
	}).content
	for i, b in ipairs(blocks) do
		if b.t == 'Header' then
			in_name = b.level == 1 and stringify(b.content) == 'NAME'
			if b.level == 1 then
				blocks[i] = pandoc.walk_block(b, {
					Str = function(s)
						return pandoc.Str(pandoc.text.upper(s.text))
					end,
				})
			end
		elseif in_name and (b.t == 'Para' or b.t == 'Plain') then
			blocks[i] = pandoc.walk_block(b, {
				Str = function(s)
					if s.text == '-' then
						return pandoc.RawInline('man', '\\-')
					end
				end,
			})
		end
	end
	doc.blocks = pandoc.walk_block(pandoc.Div(blocks), keep_together).content
	return doc
end
