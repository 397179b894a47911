// A small XML well-formedness checker for the SVG tests: balanced tags, one
// root, quoted and unique attributes, only known entities, no stray '<'.
// Returns every element with its attributes so tests can count them.
#pragma once

#include <cctype>
#include <map>
#include <string>
#include <vector>

namespace hexir::testing {

struct XmlElement {
  std::string name;
  std::map<std::string, std::string> attributes;
  std::string text;  // character data directly inside it (entities left as written)
};

struct XmlCheck {
  bool ok = false;
  std::string error;
  std::vector<XmlElement> elements;  // in document order

  size_t count(const std::string& name) const {
    size_t n = 0;
    for (const XmlElement& e : elements) n += e.name == name;
    return n;
  }
  // Elements `name` whose class attribute contains the word `word`.
  size_t count_class(const std::string& name, const std::string& word) const {
    size_t n = 0;
    for (const XmlElement& e : elements) {
      if (e.name != name) continue;
      auto it = e.attributes.find("class");
      if (it == e.attributes.end()) continue;
      const std::string padded = " " + it->second + " ";
      n += padded.find(" " + word + " ") != std::string::npos;
    }
    return n;
  }
};

inline bool xml_entities_ok(const std::string& text, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) {
    if (text[i] == '<') return false;
    if (text[i] != '&') continue;
    const size_t semi = text.find(';', i);
    if (semi == std::string::npos || semi >= end) return false;
    const std::string entity = text.substr(i + 1, semi - i - 1);
    if (entity != "amp" && entity != "lt" && entity != "gt" && entity != "quot" && entity != "apos" &&
        !(entity.size() > 1 && entity[0] == '#'))
      return false;
    i = semi;
  }
  return true;
}

inline XmlCheck check_xml(const std::string& doc) {
  XmlCheck out;
  auto fail = [&](const std::string& why, size_t at) {
    out.ok = false;
    out.error = why + " at byte " + std::to_string(at);
    return out;
  };
  auto is_name_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':' || c == '-' || c == '.';
  };
  size_t i = 0;
  if (doc.compare(0, 5, "<?xml") == 0) {
    i = doc.find("?>");
    if (i == std::string::npos) return fail("unterminated prolog", 0);
    i += 2;
  }
  std::vector<size_t> stack;  // indices into out.elements
  int roots = 0;
  while (i < doc.size()) {
    const size_t lt = doc.find('<', i);
    const size_t text_end = lt == std::string::npos ? doc.size() : lt;
    if (!xml_entities_ok(doc, i, text_end)) return fail("bad character data", i);
    if (stack.empty()) {
      for (size_t k = i; k < text_end; ++k)
        if (!std::isspace(static_cast<unsigned char>(doc[k]))) return fail("text outside the root", k);
    } else {
      out.elements[stack.back()].text.append(doc, i, text_end - i);
    }
    if (lt == std::string::npos) break;
    i = lt + 1;
    if (doc.compare(i, 3, "!--") == 0) {
      const size_t end = doc.find("-->", i);
      if (end == std::string::npos) return fail("unterminated comment", lt);
      i = end + 3;
      continue;
    }
    const bool closing = i < doc.size() && doc[i] == '/';
    if (closing) ++i;
    const size_t name_begin = i;
    while (i < doc.size() && is_name_char(doc[i])) ++i;
    if (i == name_begin) return fail("tag without a name", lt);
    const std::string name = doc.substr(name_begin, i - name_begin);
    if (closing) {
      while (i < doc.size() && std::isspace(static_cast<unsigned char>(doc[i]))) ++i;
      if (i >= doc.size() || doc[i] != '>') return fail("bad closing tag", lt);
      ++i;
      if (stack.empty() || out.elements[stack.back()].name != name)
        return fail("closing </" + name + "> does not match", lt);
      stack.pop_back();
      continue;
    }
    if (stack.empty() && ++roots > 1) return fail("second root element", lt);
    XmlElement element;
    element.name = name;
    bool self_closing = false;
    for (;;) {
      const size_t before = i;
      while (i < doc.size() && std::isspace(static_cast<unsigned char>(doc[i]))) ++i;
      if (i >= doc.size()) return fail("unterminated tag", lt);
      if (doc[i] == '>') {
        ++i;
        break;
      }
      if (doc.compare(i, 2, "/>") == 0) {
        i += 2;
        self_closing = true;
        break;
      }
      if (i == before) return fail("attributes need whitespace between them", i);
      const size_t attr_begin = i;
      while (i < doc.size() && is_name_char(doc[i])) ++i;
      if (i == attr_begin) return fail("bad attribute name", i);
      const std::string attr = doc.substr(attr_begin, i - attr_begin);
      if (i >= doc.size() || doc[i] != '=') return fail("attribute without '='", i);
      ++i;
      if (i >= doc.size() || (doc[i] != '"' && doc[i] != '\'')) return fail("unquoted attribute", i);
      const char quote = doc[i++];
      const size_t end = doc.find(quote, i);
      if (end == std::string::npos) return fail("unterminated attribute", i);
      if (!xml_entities_ok(doc, i, end)) return fail("bad attribute value", i);
      if (!element.attributes.emplace(attr, doc.substr(i, end - i)).second)
        return fail("duplicate attribute '" + attr + "'", i);
      i = end + 1;
    }
    out.elements.push_back(std::move(element));
    if (!self_closing) stack.push_back(out.elements.size() - 1);
  }
  if (!stack.empty()) return fail("unclosed <" + out.elements[stack.back()].name + ">", doc.size());
  if (roots != 1) return fail("no root element", 0);
  out.ok = true;
  return out;
}

}  // namespace hexir::testing
